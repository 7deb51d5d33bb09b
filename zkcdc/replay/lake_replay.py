"""`zkcdc replay PATH --lake URI`: a log's change records into the lake's tables, by the same
job as `zkcdc stream history` over the log as bounded input; a second backfill of the same log
adds nothing (streaming/lake/changes_writer.py)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from zkcdc.capture.delivery.event_log import Damage
from zkcdc.replay.alerts_replay import readable_log
from zkcdc.streaming.job.change_source import LogInput
from zkcdc.streaming.lake.history_job import HistoryJobOptions, run_history


def replay_into_lake(
    log: Path,
    lake: str,
    master: str = "local[2]",
    on_damage: Callable[[Damage], None] = lambda d: None,
) -> list[Damage]:
    """The log's records into the lake; returns the damage found (the valid part was used)."""
    work = Path(tempfile.mkdtemp(prefix="zkcdc-replay-lake-"))
    try:
        source, damaged = readable_log(log, work, on_damage)
        options = HistoryJobOptions(
            source=LogInput(source),
            lake=lake,
            checkpoint=work / "checkpoint",
            master=master,
            available_now=True,
        )
        run_history(options, threading.Event())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return damaged
