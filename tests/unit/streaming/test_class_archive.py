"""The driver's class archive: recorded once by a training run, renamed into place only after
that run ends well, never tried again after a failure, named after the Java, pyspark and class
path it was made on. The training command is a stand-in here (the real one starts Spark: the
integration test `test_spark_class_archive.py` covers it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until

from zkcdc.streaming.job import class_archive
from zkcdc.streaming.job.class_archive import (
    SWITCH_ENV,
    archive_path,
    driver_options,
    ready_archive,
)
from zkcdc.streaming.job.spark_jars import pyspark_home

# A stand-in for the training run: counts its runs in RUNS, then writes the archive where the
# JVM's -XX:ArchiveClassesAtExit would (or fails, or writes nothing, as FAKE_MODE says).
FAKE = """
import os, re, sys
with open(os.environ["RUNS"], "a") as runs:
    runs.write("run\\n")
mode = os.environ.get("FAKE_MODE", "ok")
if mode == "fail":
    sys.exit("Spark did not start: boom")
if mode == "ok":
    target = re.search(r"-XX:ArchiveClassesAtExit=(\\S+)", os.environ["SPARK_SUBMIT_OPTS"])[1]
    open(target, "wb").write(b"archive")
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    runs = tmp_path / "runs"
    monkeypatch.setenv("RUNS", str(runs))
    monkeypatch.delenv(SWITCH_ENV, raising=False)
    monkeypatch.delenv(class_archive.TRAINING_ENV, raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    return [sys.executable, "-c", FAKE], runs


def _runs(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_the_archive_is_recorded_once_and_then_reused(
    tmp_path: Path, fake: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    command, runs = fake
    archive = ready_archive(tmp_path / "cache", [], command)
    assert archive is not None and archive.read_bytes() == b"archive"
    assert "recording Spark's classes" in capsys.readouterr().err
    assert ready_archive(tmp_path / "cache", [], command) == archive
    assert _runs(runs) == 1
    # Nothing half-written left beside it.
    assert sorted(p.name for p in archive.parent.iterdir() if not p.name.endswith(".lock")) == [
        archive.name
    ]


@pytest.mark.parametrize(
    ("mode", "reason"), [("fail", "Spark did not start: boom"), ("none", "wrote no archive")]
)
def test_a_failed_training_leaves_no_archive_and_is_not_run_again(
    tmp_path: Path, fake: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch, mode: str,
    reason: str,
) -> None:  # fmt: skip
    command, runs = fake
    monkeypatch.setenv("FAKE_MODE", mode)
    assert ready_archive(tmp_path / "cache", [], command) is None
    failed = list((tmp_path / "cache" / "_build").glob("*.failed"))
    assert len(failed) == 1 and reason in failed[0].read_text()
    assert not list((tmp_path / "cache" / "_build").glob("*.jsa*"))
    assert not list((tmp_path / "cache" / "_build").glob(".*.jsa.*"))
    monkeypatch.setenv("FAKE_MODE", "ok")
    assert ready_archive(tmp_path / "cache", [], command) is None
    assert _runs(runs) == 1


def test_a_job_does_not_wait_while_another_process_records_it(
    tmp_path: Path, fake: tuple[list[str], Path]
) -> None:
    """A job that starts while another records the archive starts at once, without it (the
    recording takes a minute); the next one after it maps it."""
    command, runs = fake
    path = archive_path(tmp_path / "cache", [])
    holder = subprocess.Popen(  # another process, recording: holds the lock
        [sys.executable, "-c", "import sys, pathlib; from zkcdc.ground.fill_lock import filling\n"
         f"with filling(pathlib.Path({str(path.parent)!r}), {path.stem!r}):\n"
         "    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert ready_archive(tmp_path / "cache", [], command) is None
        assert _runs(runs) == 0
    finally:
        holder.communicate("", timeout=30)
    assert ready_archive(tmp_path / "cache", [], command) == path
    assert _runs(runs) == 1


def test_only_the_newest_archives_are_kept(
    tmp_path: Path, fake: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh clone's venv records an archive of its own (~170 MB): older ones go."""
    command, _ = fake
    build = tmp_path / "cache" / "_build"
    build.mkdir(parents=True)
    for age in range(5):
        old = build / f"spark-driver-classes-old{age}.jsa"
        old.write_bytes(b"old")
        os.utime(old, (1_000_000 - age, 1_000_000 - age))
    recorded = ready_archive(tmp_path / "cache", [], command)
    kept = sorted(p.name for p in build.glob("*.jsa"))
    assert recorded is not None and recorded.name in kept
    assert len(kept) == class_archive.ARCHIVES_KEPT
    assert kept == sorted([recorded.name, "spark-driver-classes-old0.jsa",
                           "spark-driver-classes-old1.jsa"])  # fmt: skip


def test_switched_off_nothing_is_recorded_or_used(
    tmp_path: Path, fake: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    command, runs = fake
    assert ready_archive(tmp_path / "cache", [], command) is not None
    monkeypatch.setenv(SWITCH_ENV, "off")
    assert ready_archive(tmp_path / "cache", [], command) is None
    assert ready_archive(tmp_path / "other-cache", [], command) is None
    assert _runs(runs) == 1


def test_a_spark_conf_folder_holding_files_means_no_archive(
    tmp_path: Path, fake: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark puts that folder on the driver's class path, where Java cannot archive with it."""
    command, runs = fake
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert ready_archive(tmp_path / "cache", [], command) is not None  # empty: fine
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    assert ready_archive(tmp_path / "other-cache", [], command) is None
    assert _runs(runs) == 1


def test_another_class_path_names_another_archive(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"1")
    first = archive_path(tmp_path, [jar])
    assert archive_path(tmp_path, [jar]) == first
    jar.write_bytes(b"12")  # another build of the jar
    assert archive_path(tmp_path, [jar]) != first
    assert archive_path(tmp_path, []) != first


def test_the_same_jars_in_another_folder_name_another_archive(tmp_path: Path) -> None:
    # Two venvs filled by uv hold links to one cached file: same name, size and time. A JVM
    # refuses an archive once the folder it was recorded from is gone (2026-11-29, by hand).
    (tmp_path / "venv-a").mkdir()
    (tmp_path / "venv-b").mkdir()
    jar = tmp_path / "venv-a" / "spark-core.jar"
    jar.write_bytes(b"1")
    linked = tmp_path / "venv-b" / "spark-core.jar"
    os.link(jar, linked)
    assert archive_path(tmp_path, [jar]) != archive_path(tmp_path, [linked])


def test_a_jvm_that_cannot_use_an_archive_says_nothing_of_it(tmp_path: Path) -> None:
    """An archive made on another class path is refused in silence (the JVM would otherwise
    print a warning on a command's own output), and the JVM runs on."""
    archive = tmp_path / "other.jsa"
    launcher = next((pyspark_home() / "jars").glob("spark-launcher_*.jar"))
    subprocess.run(
        [
            "java",
            f"-XX:ArchiveClassesAtExit={archive}",
            "-cp",
            str(launcher),
            "org.apache.spark.launcher.Main",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )  # fmt: skip  (it fails for want of arguments, and archives)
    assert archive.exists()
    loud = subprocess.run(["java", f"-XX:SharedArchiveFile={archive}", "-version"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert "Unable to use shared archive" in loud.stdout + loud.stderr  # the case is real
    options = driver_options(archive).split()
    run = subprocess.run(["java", *options, "-version"], capture_output=True, text=True,
                         timeout=60, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "archive" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
    assert driver_options(None) == ""


def test_a_job_killed_while_recording_leaves_the_recording_to_finish_and_no_second_one(
    tmp_path: Path, fake: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A supervisor restarting a crashing job: the killed job's recording goes on (holding the
    lock) and puts the archive in place; a job started meanwhile starts no recording of its own."""
    command, runs = fake
    gate = tmp_path / "gate"
    monkeypatch.setenv("FAKE_GATE", str(gate))
    gated = [sys.executable, "-c", "import os, pathlib, time\n"
             "pathlib.Path(os.environ['FAKE_GATE'] + '.waiting').touch()\n"
             "while not pathlib.Path(os.environ['FAKE_GATE']).exists(): time.sleep(0.05)\n"
             + FAKE]  # fmt: skip
    job = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib\n"
         "from zkcdc.streaming.job.class_archive import ready_archive\n"
         "ready_archive(pathlib.Path(sys.argv[1]), [], sys.argv[2:])", str(tmp_path / "cache"),
         *gated],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert job.stderr is not None and "recording Spark's classes" in job.stderr.readline()
    wait_until(Path(f"{gate}.waiting").exists, 60, what="the recording under way")
    job.kill()
    job.wait(30)
    path = archive_path(tmp_path / "cache", [])
    assert ready_archive(tmp_path / "cache", [], command) is None  # not waited for
    gate.touch()
    with (path.parent / f".{path.stem}.lock").open("a") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)  # until the recorder is done
    assert path.read_bytes() == b"archive"
    assert _runs(runs) == 1
    assert ready_archive(tmp_path / "cache", [], command) == path
    assert not list(path.parent.glob(f".{path.name}.*"))
