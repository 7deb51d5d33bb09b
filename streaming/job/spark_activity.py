"""What a Spark session is running: a stop waits for its jobs and tasks to end before Spark's
own stop deletes their local directories."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from zkcdc.ground import waiting

# Spark's stop deletes its local directories. A task that the query's stop interrupted can
# still be writing there (a shuffle file, a state store's), and the delete then fails with a
# Java stack trace in the log. So the stop waits for the running tasks to end, for a while.
TASKS_END_WAIT_S = 8.0
# Between two stages of a job no task runs: Spark is quiet only when it shows no job and no
# task on this many looks in a row (0.1 s apart).
QUIET_LOOKS = 3
# How often a stop is looked for while a batch query runs (cancelled_on_stop).
STOP_LOOK_S = 0.2


def running_tasks(spark: Any) -> int:
    """Tasks running on the driver and every executor, as Spark's status tracker counts them
    (a task counts until its thread has ended, killed or not). PySpark's tracker has no
    executor list, so this asks the JVM's."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return sum(int(info.numRunningTasks()) for info in infos)


def tasks_ended(spark: Any, within_s: float) -> bool:
    """Whether the jobs and their tasks all ended within `within_s` (QUIET_LOOKS)."""
    from py4j.protocol import Py4JError

    looks = 0

    def quiet() -> bool:
        nonlocal looks
        busy = spark.sparkContext.statusTracker().getActiveJobsIds() or running_tasks(spark)
        looks = 0 if busy else looks + 1
        return looks >= QUIET_LOOKS

    try:
        waiting.wait_until(quiet, within_s, what="the tasks to end")
    except waiting.WaitFailed:
        return False
    except Py4JError:  # the JVM cannot say (it is going): Spark's own stop goes on
        return True
    return True


@contextlib.contextmanager
def cancelled_on_stop(spark: Any, stop: threading.Event, tag: str) -> Iterator[None]:
    """The Spark jobs this thread starts in the block, tagged `tag`, cancelled once `stop` is
    set: a stop during a batch query (a backlog's take) ends it rather than waiting for it.
    Cancelled again while the block runs on, for a job submitted after the first cancel."""
    context = spark.sparkContext
    context.addJobTag(tag)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(STOP_LOOK_S) and not done.is_set():
                with contextlib.suppress(Exception):  # the JVM may be going already
                    context.cancelJobsWithTag(tag)
                done.wait(STOP_LOOK_S)

    watcher = threading.Thread(target=watch, name="cancel-on-stop", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        with contextlib.suppress(Exception):
            context.removeJobTag(tag)
