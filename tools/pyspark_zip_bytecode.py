"""Adds compiled bytecode to the venv's pyspark.zip, which Spark's Python workers import PySpark
from (the JVM puts `$SPARK_HOME/python/lib/pyspark.zip` first on their path).

A zip holds no bytecode unless it is put there, and Python does not write any into one, so each
worker process compiled the PySpark modules it imports from source: ~1 s of CPU per process on
this machine, three times the import itself. The worker that transformWithStateInPandas starts
on the driver at each query start must connect back within Spark's fixed 10 s, which a loaded
machine then missed. The bytecode is unchecked-hash (PEP 552), so zipimport takes it without
comparing times; it is compiled from the very source beside it in the archive.

The file is replaced, not rewritten in place: the installer links it from its own cache."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import zipfile
from importlib._bootstrap_external import _code_to_hash_pyc  # type: ignore[attr-defined]
from pathlib import Path

from zkcdc.streaming.job.spark_jars import pyspark_home


def pyspark_zip() -> Path:
    return pyspark_home() / "python" / "lib" / "pyspark.zip"


def has_bytecode(archive: Path) -> bool:
    with zipfile.ZipFile(archive) as zipped:
        return any(name.endswith(".pyc") for name in zipped.namelist())


def add_bytecode(archive: Path) -> int:
    """Writes the archive again with a .pyc beside each .py; how many were compiled."""
    compiled = 0
    handle, scratch = tempfile.mkstemp(dir=archive.parent, suffix=".zip")
    os.close(handle)
    try:
        with zipfile.ZipFile(archive) as source, zipfile.ZipFile(scratch, "w") as target:
            for info in source.infolist():
                data = source.read(info)
                target.writestr(info, data)
                if not info.filename.endswith(".py"):
                    continue
                try:
                    code = compile(data, f"{archive}/{info.filename}", "exec", dont_inherit=True)
                except SyntaxError:  # a file PySpark ships but never imports here
                    continue
                pyc = _code_to_hash_pyc(code, importlib.util.source_hash(data), checked=False)
                target.writestr(
                    zipfile.ZipInfo(info.filename + "c", info.date_time), bytes(pyc),
                    compress_type=zipfile.ZIP_DEFLATED,
                )  # fmt: skip
                compiled += 1
        Path(scratch).chmod(archive.stat().st_mode & 0o777)
        Path(scratch).replace(archive)
    finally:
        Path(scratch).unlink(missing_ok=True)
    return compiled


def main() -> int:
    archive = pyspark_zip()
    if not archive.is_file():
        raise SystemExit(f"pyspark_zip_bytecode: no {archive}")
    if not has_bytecode(archive):
        print(f"pyspark.zip: {add_bytecode(archive)} modules compiled ({archive})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
