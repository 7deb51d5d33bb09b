"""The zip of zkcdc's code that spark-submit ships (--py-files) holds every module, importable
from the zip alone: a folder without __init__.py imports from a checkout but not from a zip."""

import subprocess
import sys
import zipfile
from pathlib import Path

from zkcdc.streaming.job.spark_session import package_zip

_IMPORT_ALL = """
import importlib, sys, zipfile
archive = sys.argv[1]
sys.path.insert(0, archive)
names = sorted(
    n[:-3].replace("/", ".").removesuffix(".__init__")
    for n in zipfile.ZipFile(archive).namelist() if n.endswith(".py")
)
for name in names:
    if name == "zkcdc.__main__":
        continue
    module = importlib.import_module(name)
    assert module.__file__.startswith(archive), (name, module.__file__)
print(len(names))
"""


def test_every_module_in_the_code_zip_imports_from_the_zip(tmp_path: Path) -> None:
    archive = package_zip(tmp_path)
    shipped = [n for n in zipfile.ZipFile(archive).namelist() if n.endswith(".py")]
    assert "zkcdc/cli.py" in shipped and "zkcdc/capture/kraft/source.py" in shipped
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, str(archive)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) == len(shipped)
