"""What the alert job changes in Spark's Python workers, where its stateful step runs.

PySpark's worker calls `importlib.invalidate_caches()` at the start of every task
(`worker_util.setup_spark_files`). On Python 3.10 and 3.11, that makes each zip importer
re-read its archive's whole directory (CPython gh-103200; 3.12 reads it lazily instead), and a
worker's path holds pyspark.zip, py4j's zip and spark-core's jar (thousands of entries) through
a dozen importers: ~0.3 s of every task on this project's machine, most of a small micro-batch's
stateful step (measured with py-spy, 2026-11-27). Those archives do not change while a worker
lives, and a new archive gets an importer of its own, which reads it afresh.

PySpark's daemon also runs a full collection of the cycle collector after every task of a
reused worker (`daemon.py`: `gc.collect()`). A full collection walks every object the worker
holds, and a worker that has imported pandas, pyarrow, pyspark and zkcdc holds ~90,000 of them:
~50-80 ms of CPU after each task, two tasks a micro-batch, on a machine of two cores (py-spy
of a warm alert job at 40 partitions, B9: two thirds of its workers' samples). What a worker
has loaded by its first task lives as long as the worker, so it is frozen out of the
collector's reach (`gc.freeze`); what the tasks make afterwards is collected as before."""

from __future__ import annotations

import gc
import sys
import zipimport
from typing import Any


def _keep_directory(self: Any) -> None:
    """zipimporter.invalidate_caches, once its archive's directory has been read: kept."""


def keep_zip_directories() -> None:
    """Stops zip importers re-reading their archives at each task start (Python < 3.12)."""
    if sys.version_info < (3, 12):
        zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign]


_loaded_frozen = False


def freeze_what_is_loaded() -> None:
    """Once a worker: what it holds now (its modules) is left out of every later collection."""
    global _loaded_frozen
    if not _loaded_frozen:
        gc.collect()  # what is garbage already is not kept for the worker's life
        gc.freeze()
        _loaded_frozen = True


def ready_for_next_tasks() -> None:
    """What a task of the alert job does for the worker's later tasks (above)."""
    keep_zip_directories()
    freeze_what_is_loaded()
