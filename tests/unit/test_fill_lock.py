"""One process at a time fills a cache; the lock goes with its holder."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from zkcdc.ground.fill_lock import filling


def test_a_second_filler_waits_until_the_first_is_done(tmp_path: Path) -> None:
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with filling(tmp_path, "jars"):
            order.append("first in")
            first_in.set()
            time.sleep(0.3)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    with filling(tmp_path, "jars"):
        order.append("second in")
    thread.join(10)
    assert order == ["first in", "first out", "second in"]


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from zkcdc.ground.fill_lock import filling\n"
        "with filling(Path(sys.argv[1]), 'jars'):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait(10)
    started = time.monotonic()
    with filling(tmp_path, "jars"):
        pass
    assert time.monotonic() - started < 5
