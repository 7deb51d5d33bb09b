"""Waiting for ZooKeeper's writes: a write to a file of the folder wakes the wait at once, a
quiet folder lets it sleep its timeout, and where inotify cannot watch it falls back to polling."""

from __future__ import annotations

import threading
import time

from zkcdc.capture.txnlog.dir_wakeup import DirectoryWakeup


def test_a_write_in_the_folder_wakes_the_wait_and_a_quiet_folder_sleeps_the_timeout(tmp_path):
    log = tmp_path / "log.1"
    log.write_bytes(b"ZKLG")
    wakeup = DirectoryWakeup(tmp_path, poll_interval_s=0.002)
    try:
        assert wakeup.notified
        wakeup.wait(0)  # drain the creation above
        started = time.monotonic()
        assert wakeup.wait(0.2) is False
        assert time.monotonic() - started >= 0.19

        writer = threading.Timer(0.05, lambda: log.open("ab").write(b"entry"))
        writer.start()
        started = time.monotonic()
        assert wakeup.wait(5.0) is True
        assert time.monotonic() - started < 2.0
        writer.join()
        assert wakeup.wait(0) is False  # one wake-up per batch of writes, then quiet again
    finally:
        wakeup.close()


def test_a_write_before_the_wait_is_not_missed(tmp_path):
    wakeup = DirectoryWakeup(tmp_path, poll_interval_s=0.002)
    try:
        (tmp_path / "log.2").write_bytes(b"ZKLG")  # written while the capture was reading
        started = time.monotonic()
        assert wakeup.wait(5.0) is True
        assert time.monotonic() - started < 1.0
    finally:
        wakeup.close()


def test_without_inotify_the_wait_polls_at_the_poll_interval(tmp_path):
    slept: list[float] = []
    wakeup = DirectoryWakeup(tmp_path / "missing", poll_interval_s=0.002, sleep=slept.append)
    assert not wakeup.notified
    assert wakeup.wait(0.1) is True and slept == [0.002]
    wakeup.close()
