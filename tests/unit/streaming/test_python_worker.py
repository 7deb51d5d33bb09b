"""The Spark Python worker's task start: its zip archives are not re-read at every task, and
what it loaded is not walked by the collection PySpark runs after each task."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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
