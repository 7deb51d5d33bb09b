"""The venv's pyspark.zip gets bytecode that Python imports as it is (no compiling at each
worker start), that behaves as its source does, and that is added once."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import pyspark_zip_bytecode


def _archive(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr("pkg/__init__.py", "WHERE = __file__\n")
        zipped.writestr("pkg/mod.py", "def twice(x):\n    return 2 * x\n")
        zipped.writestr("pkg/broken.py", "def (:\n")  # shipped, never imported
        zipped.writestr("pkg/data.txt", "kept\n")
    return path


def test_the_archive_gains_bytecode_that_python_imports_instead_of_the_source(
    tmp_path: Path,
) -> None:
    archive = _archive(tmp_path / "lib.zip")
    assert not pyspark_zip_bytecode.has_bytecode(archive)
    assert pyspark_zip_bytecode.add_bytecode(archive) == 2
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        assert zipped.read("pkg/data.txt") == b"kept\n"
    assert {"pkg/__init__.pyc", "pkg/mod.pyc", "pkg/broken.py"} <= names
    assert "pkg/broken.pyc" not in names
    assert pyspark_zip_bytecode.has_bytecode(archive)
    shown = subprocess.run(
        [sys.executable, "-c", "import pkg, pkg.mod; print(pkg.WHERE, pkg.mod.twice(21))"],
        env={"PYTHONPATH": str(archive)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout.split() == [f"{archive}/pkg/__init__.pyc", "42"]


def test_the_installed_pyspark_zip_carries_bytecode_once_setup_has_run() -> None:
    assert pyspark_zip_bytecode.has_bytecode(pyspark_zip_bytecode.pyspark_zip())
