"""What the alert job changes in Spark's Python workers, where its stateful step runs.

PySpark's worker calls `importlib.invalidate_caches()` at the start of every task
(`worker_util.setup_spark_files`). On Python 3.10 and 3.11, that makes each zip importer
re-read its archive's whole directory (CPython gh-103200; 3.12 reads it lazily instead), and a
worker's path holds pyspark.zip, py4j's zip and spark-core's jar (thousands of entries) through
a dozen importers: ~0.3 s of every task on this project's machine, most of a small micro-batch's
stateful step (measured with py-spy, 2026-11-27). Those archives do not change while a worker
lives, and a new archive gets an importer of its own, which reads it afresh."""

from __future__ import annotations

import sys
import zipimport
from typing import Any


def _keep_directory(self: Any) -> None:
    """zipimporter.invalidate_caches, once its archive's directory has been read: kept."""


def keep_zip_directories() -> None:
    """Stops zip importers re-reading their archives at each task start (Python < 3.12)."""
    if sys.version_info < (3, 12):
        zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign]
