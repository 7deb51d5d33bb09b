"""`pip install .` adds one import package, `zkcdc` (capture and streaming inside it), and the
`zkcdc` console script: nothing named `capture` or `streaming` lands in site-packages."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_a_clean_install_adds_one_top_level_package_and_the_console_script(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "--wheel-dir", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("zkcdc-*.whl")

    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    (site,) = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    before = {p.name for p in site.iterdir()}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    added = {p.name for p in site.iterdir()} - before
    assert {n for n in added if not n.endswith(".dist-info")} == {"zkcdc"}, added
    package = site / "zkcdc"
    for part in ("capture/runner.py", "capture/watch/source.py", "streaming/rules/alert_rules.py",
                 "streaming/sinks/sink.py", "ground/kafka_connection.py"):  # fmt: skip
        assert (package / part).is_file(), f"{part} is not in the wheel"
        assert not (package / part).is_symlink()
    assert (tmp_path / "venv" / "bin" / "zkcdc").is_file()
    avro = tmp_path / "venv" / "share" / "zkcdc" / "avro"
    assert (avro / "ChangeRecord.avsc").is_file()
    assert (avro / "history" / "ChangeRecord" / "v1.avsc").is_file()
