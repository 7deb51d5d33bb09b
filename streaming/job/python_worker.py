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
collector's reach (`gc.freeze`); what the tasks make afterwards is collected as before.

PySpark 4.2 hands transformWithStateInPandas its input row by row: each Arrow batch becomes a
pandas frame, which it walks with `itertuples` to build a new frame of each grouping key's
rows. The shards get most of a micro-batch's rows (each record once per shard, most as ticks),
so the worker's later tasks cut each frame into its keys' runs with slices instead
(`take_input_by_key`); each key gets the same rows and columns."""

from __future__ import annotations

import gc
import sys
import zipimport
from collections.abc import Iterator
from itertools import groupby
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
    take_input_by_key()
    freeze_what_is_loaded()


def _keyed_frames(serializer: Any, stream: Any) -> Iterator[tuple[Any, ...]]:
    """PySpark 4.2's `TransformWithStateInPandasSerializer.load_stream`, less its row-by-row
    middle: each Arrow batch is made a pandas frame as there, but then cut into runs of one
    grouping key with slices, where PySpark walks it with `itertuples` and builds a new frame
    of each key's rows. Spark sends each key's rows together, as PySpark's own assumes; the
    frames a key gets hold the same rows and columns. Its signature is load_stream's: it is
    put in that method's place (`take_input_by_key`)."""
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql.conversion import ArrowBatchTransformer
    from pyspark.sql.pandas.serializers import ArrowStreamPandasSerializer
    from pyspark.sql.streaming.stateful_processor_util import (
        TransformWithStateInPandasFuncMode as Mode,
    )

    arrow = super(ArrowStreamPandasSerializer, serializer).load_stream(stream)

    def runs() -> Iterator[tuple[tuple[Any, ...], Any]]:
        for batch in arrow:
            if batch.num_rows == 0:
                continue
            frame = pd.concat(
                ArrowBatchTransformer.to_pandas(
                    batch,
                    timezone=serializer._timezone,
                    schema=serializer._input_type,
                    struct_in_pandas=serializer._struct_in_pandas,
                    ndarray_as_list=serializer._ndarray_as_list,
                    prefer_int_ext_dtype=serializer._prefer_int_ext_dtype,
                    df_for_struct=serializer._df_for_struct,
                ),
                axis=1,
            )
            # The keys as Python values, as itertuples gives them (the state server takes them).
            columns = [frame.iloc[:, o].tolist() for o in serializer.key_offsets]
            start = 0
            for key, run in groupby(zip(*columns, strict=True)):
                end = start + sum(1 for _ in run)
                yield key, frame.iloc[start:end]
                start = end

    for key, frames in groupby(runs(), key=lambda run: run[0]):
        yield (Mode.PROCESS_DATA, key, frames)
    yield (Mode.PROCESS_TIMER, None, None)
    yield (Mode.COMPLETE, None, None)


# The PySpark whose input path `_keyed_frames` stands in for: another keeps its own.
_KEYED_FRAMES_PYSPARK = "4.2.0"


def take_input_by_key() -> None:
    """The worker's transformWithStateInPandas input cut by key in slices (`_keyed_frames`)."""
    import pyspark
    from pyspark.sql.pandas.serializers import TransformWithStateInPandasSerializer as Serializer

    if pyspark.__version__ == _KEYED_FRAMES_PYSPARK and Serializer.load_stream is not _keyed_frames:
        Serializer.load_stream = _keyed_frames  # type: ignore[method-assign]
