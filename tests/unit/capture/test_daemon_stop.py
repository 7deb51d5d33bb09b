"""A stop signal always ends the main loop's wait on its inbox, however the signal falls."""

from __future__ import annotations

import signal
import threading
import time

from zkcdc.capture.runner import CaptureRunner
from zkcdc.capture.settings import load_settings
from zkcdc.capture.watch.messages import Read, Wake
from zkcdc.capture.watch.source import WatchSource, _drain


def test_a_stop_signal_whose_handler_outlasts_the_inbox_wait_still_wakes_the_loop():
    runner = CaptureRunner(load_settings(None, zookeeper="127.0.0.1:1"))
    source = runner.source
    assert isinstance(source, WatchSource)

    def slow_stop(*_: object) -> None:
        time.sleep(0.1)  # longer than the wait's own timeout, as a busy process may be
        runner.stop()

    previous = signal.signal(signal.SIGALRM, slow_stop)
    # Only a safety net: without the wake-up the wait would block until this put.
    late = threading.Timer(5.0, lambda: source._inbox.put(Read("/late", None, 0)))
    late.start()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        started = time.monotonic()
        items = _drain(source._inbox, 0.05)
        waited = time.monotonic() - started
    finally:
        late.cancel()
        signal.signal(signal.SIGALRM, previous)
    assert items == [Wake()]
    assert waited < 2.0
