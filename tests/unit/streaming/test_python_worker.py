"""The Spark Python worker's task start: its zip archives are not re-read at every task, and
what it loaded is not walked by the collection PySpark runs after each task."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

# Run apart: the change is to the interpreter's zipimport, for the rest of its life.
SCRIPT = textwrap.dedent(
    """
    import importlib, sys, zipfile, zipimport
    from pathlib import Path

    folder = Path(sys.argv[1])
    def archive(name, module, value):
        path = folder / name
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{module}.py", f"VALUE = {value}")
        return str(path)

    sys.path.append(archive("first.zip", "zipped_first", 1))
    import zipped_first
    reads = []
    real = zipimport._read_directory
    zipimport._read_directory = lambda path: reads.append(path) or real(path)

    from zkcdc.streaming.job.python_worker import keep_zip_directories
    keep_zip_directories()
    keep_zip_directories()  # a second task's call changes nothing more
    for _ in range(3):  # what PySpark's worker does at each task start
        importlib.invalidate_caches()
    assert not reads, reads

    # An archive added later (a file Spark ships to the worker) is read and imported.
    sys.path.append(archive("second.zip", "zipped_second", 2))
    importlib.invalidate_caches()
    import zipped_second
    assert (zipped_first.VALUE, zipped_second.VALUE) == (1, 2)
    print("ok")
    """
)


def test_a_task_start_reads_no_zip_archive_again_and_a_new_archive_still_imports(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


# Run apart too: freezing is for the interpreter's life.
FREEZE_SCRIPT = textwrap.dedent(
    """
    import gc
    import pandas, pyarrow  # what a worker holds by its first task

    from zkcdc.streaming.job.python_worker import ready_for_next_tasks
    loaded = len(gc.get_objects())
    ready_for_next_tasks()
    frozen = gc.get_freeze_count()
    ready_for_next_tasks()  # a later task's call freezes nothing more
    assert gc.get_freeze_count() == frozen, (gc.get_freeze_count(), frozen)
    assert frozen >= loaded * 0.9, (frozen, loaded)
    # What the daemon's collection after each task walks: only what came after the first.
    assert len(gc.get_objects()) < loaded * 0.1, (len(gc.get_objects()), loaded)

    # A task's cyclic garbage is still collected.
    class Node:
        pass
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2
    print("ok")
    """
)


def test_what_a_worker_loaded_by_its_first_task_is_left_out_of_later_collections(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", FREEZE_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def _serializer() -> Any:
    from pyspark.sql.pandas.serializers import TransformWithStateInPandasSerializer

    serializer = TransformWithStateInPandasSerializer(
        timezone="UTC", safecheck=False, assign_cols_by_name=True, prefer_int_ext_dtype=False,
        arrow_max_records_per_batch=3, arrow_max_bytes_per_batch=2**31 - 1,
        int_to_decimal_coercion_enabled=False,
    )  # fmt: skip
    serializer.key_offsets = [0, 1]
    return serializer


def _arrow_stream(rows: list[tuple[Any, ...]], batch_rows: int) -> io.BytesIO:
    """Rows (cluster, slot, seq, path, events) as Spark sends a grouped input: an Arrow stream
    of batches of `batch_rows`, a key's rows together, a key's run across batches."""
    import pyarrow as pa

    schema = pa.schema([("cluster", pa.string()), ("slot", pa.int32()), ("seq", pa.int64()),
                        ("path", pa.string()), ("events", pa.string())])  # fmt: skip
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, schema) as writer:
        for start in range(0, len(rows), batch_rows):
            chunk = rows[start : start + batch_rows]
            writer.write_batch(pa.RecordBatch.from_pylist(
                [dict(zip(schema.names, row, strict=True)) for row in chunk], schema=schema
            ))  # fmt: skip
    sink.seek(0)
    return sink


def _as_the_processor_sees_it(loaded: Any) -> list[tuple[Any, ...]]:
    """(mode, key, the key's rows as Python values, in order) of a load_stream."""
    out = []
    for mode, key, frames in loaded:
        rows: list[tuple[Any, ...]] = []
        for frame_key, frame in frames or ():
            assert frame_key == key
            assert list(frame.columns) == ["cluster", "slot", "seq", "path", "events"]
            rows += zip(*(frame[c].tolist() for c in frame.columns), strict=True)
        out.append((mode, key, rows))
    return out


_KEYS = [("c1", 0), ("c1", 1), ("c1", 2), ("c2", 0), (None, 0)]


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(st.tuples(st.sampled_from(_KEYS), st.integers(1, 7)), min_size=0, max_size=8).map(
        lambda runs: [r for i, r in enumerate(runs) if i == 0 or r[0] != runs[i - 1][0]]
    ),
    batch_rows=st.integers(1, 9),
)
def test_the_input_cut_by_key_in_slices_is_what_pysparks_own_gives_each_key(
    runs: list[tuple[tuple[Any, int], int]], batch_rows: int
) -> None:
    """The keys in the order Spark sends them, each key's rows in order, the same columns and
    values (a string column all null included), a key's run across Arrow batches one group."""
    from pyspark.sql.pandas.serializers import TransformWithStateInPandasSerializer

    from zkcdc.streaming.job.python_worker import _keyed_frames

    rows = []
    for (cluster, slot), length in runs:
        for _ in range(length):
            seq = len(rows)
            rows.append((cluster, slot, seq, None if seq % 3 else f"/p/{seq}", "[]"))
    pysparks = TransformWithStateInPandasSerializer.load_stream(
        _serializer(), _arrow_stream(rows, batch_rows)
    )
    ours = _keyed_frames(_serializer(), _arrow_stream(rows, batch_rows))
    assert _as_the_processor_sees_it(ours) == _as_the_processor_sees_it(pysparks)


def test_the_input_path_is_replaced_only_on_the_pyspark_it_was_written_for(
    monkeypatch: Any,
) -> None:
    import pyspark
    from pyspark.sql.pandas.serializers import TransformWithStateInPandasSerializer as Serializer

    from zkcdc.streaming.job import python_worker

    own = Serializer.load_stream
    monkeypatch.setattr(Serializer, "load_stream", own)  # put back after the test
    monkeypatch.setattr(pyspark, "__version__", "9.9.9")
    python_worker.take_input_by_key()
    assert Serializer.load_stream is own
    monkeypatch.setattr(pyspark, "__version__", python_worker._KEYED_FRAMES_PYSPARK)
    python_worker.take_input_by_key()
    assert Serializer.load_stream is python_worker._keyed_frames
