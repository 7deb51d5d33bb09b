"""A class-data-sharing archive of the Spark driver's classes (Java's AppCDS), recorded once for
each Java, pyspark and driver class path (a venv), so a job's driver maps Spark's classes instead of loading, parsing and
verifying ~15,000 of them from jars at each start. Measured on this project's 2-core machine
(2026-11-28, a local[2] session and one small query): 30 CPU-s and 17.5 s before, 18 CPU-s and
11 s with it; with C1 alone (the tests' JVMs) 18.5 CPU-s and 15 s before, 10 and 7.7 s with it.

The archive is made by a training run of the alert job (`zkcdc.replay.class_archive_training`)
over a small event log it writes, on a local master, with `-XX:ArchiveClassesAtExit`; a JVM
writes it when it exits, so it is written to a temporary name and renamed only after a clean
exit (a cut-short archive crashes the JVM that maps it). A JVM that cannot use the archive (another Java, other
jars) says nothing and loads its classes as before: its `cds` log is switched off."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from zkcdc.ground import logs
from zkcdc.ground.fill_lock import filling

log = logs.get("zkcdc.stream")

# Bumped when the training run changes: a new archive is recorded beside the old one.
TRAINING_VERSION = "1"
SWITCH_ENV = "ZKCDC_SPARK_CLASS_ARCHIVE"  # "off": neither record nor use one
TRAINING_ENV = "ZKCDC_SPARK_CLASS_ARCHIVE_TRAINING"  # set in the training run itself
QUIET = "-Xlog:cds*=off"  # a JVM refusing an archive otherwise says so on stdout
TRAINING_TIMEOUT_S = 600.0
# Archives kept (each ~170 MB, one a venv: a fresh clone's venv records its own); the oldest
# go. A JVM mapping one that goes keeps it until it ends; its venv records it again once.
ARCHIVES_KEPT = 3
# The training run (a replay of a made-up log through the rules) lives with the replays: a
# module above this package, so named, not imported.
TRAINING_COMMAND = (sys.executable, "-m", "zkcdc.replay.class_archive_training")


def archive_path(cache_dir: Path, class_path: Sequence[Path]) -> Path:
    """Where the archive of this Java, pyspark and class path is kept: any of them changed
    names another file (a JVM checks its archive too, and refuses a mismatch)."""
    from zkcdc.streaming.job.spark_jars import pyspark_home

    digest = hashlib.sha256(TRAINING_VERSION.encode())
    java = shutil.which("java") or "java"
    files = [Path(os.path.realpath(java)), *sorted((pyspark_home() / "jars").glob("*.jar"))]
    for file in [*files, *class_path]:
        try:
            stat = file.stat()
        except OSError:
            continue
        # The whole path: a JVM checks the archive's jars where they were when it was recorded.
        # Venvs filled by uv link one cache's files (same sizes and times): another venv's
        # archive would be used until that venv went, then refused in silence.
        digest.update(f"{file}:{stat.st_size}:{int(stat.st_mtime)}\n".encode())
    digest.update(importlib.metadata.version("pyspark").encode())
    digest.update(os.environ.get("SPARK_CONF_DIR", "").encode())  # on the class path too
    return cache_dir / "_build" / f"spark-driver-classes-{digest.hexdigest()[:16]}.jsa"


def _conf_folder_in_the_way() -> bool:
    """Spark puts its conf folder first on the driver's class path, and a JVM cannot record an
    archive with a folder holding files there (nor use one recorded without that folder)."""
    from zkcdc.streaming.job.spark_jars import pyspark_home

    folder = Path(os.environ.get("SPARK_CONF_DIR") or pyspark_home() / "conf")
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return True


def driver_options(archive: Path | None) -> str:
    """The driver's Java options that map `archive` (none without one)."""
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive is not None else ""


def ready_archive(
    cache_dir: Path,
    class_path: Sequence[Path],
    command: Sequence[str] = TRAINING_COMMAND,
    wait: bool = False,
) -> Path | None:
    """The archive, recorded first if missing (one line on stderr says so, once per machine
    and class path); None when switched off, in the training run, when it cannot be recorded
    (said once), or while another process records it: a job does not wait a minute for it
    (`wait`: it does, for the tests that need it)."""
    if os.environ.get(SWITCH_ENV, "").lower() == "off" or os.environ.get(TRAINING_ENV):
        return None
    if _conf_folder_in_the_way():
        return None
    path = archive_path(cache_dir, class_path)
    if path.exists():
        return path
    failed = path.with_suffix(".failed")
    if failed.exists():
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(path.parent, os.W_OK):  # a read-only cache (an image's): as before
        return None
    with filling(path.parent, path.stem, wait=wait) as fill:
        if not fill or path.exists() or failed.exists():
            return path if path.exists() else None
        return _record_apart(path, command, fill.fd)


def _record_apart(path: Path, command: Sequence[str], lock_fd: int) -> Path | None:
    """Records in a process of its own that holds the lock with this one (its descriptor
    passed on): a job killed while it records (a supervisor restarting a crashing job every
    few seconds) leaves it to finish and put the archive in place, and the jobs started
    meanwhile neither wait for it nor start another recording each."""
    print(f"zkcdc: recording Spark's classes for quicker starts (once, ~1 min): {path}",
          file=sys.stderr, flush=True)  # fmt: skip
    recorder = [sys.executable, "-m", "zkcdc.streaming.job.class_archive", str(path), *command]
    try:
        subprocess.run(recorder, pass_fds=(lock_fd,), timeout=TRAINING_TIMEOUT_S + 60,
                       check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("no Spark class archive: its recording did not end", reason=str(exc)[:300])
    return path if path.exists() else None


def _record(path: Path, failed: Path, command: Sequence[str]) -> Path | None:
    """The recording itself, in the recorder's process (the lock held)."""
    started = time.monotonic()
    # Under the lock no one else records this archive: a partial one is a killed recorder's.
    for stale in path.parent.glob(f".{path.name}.*"):
        with contextlib.suppress(OSError):
            stale.unlink()
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    env = {**os.environ, TRAINING_ENV: "1"}
    # The caller's Java options left out (the archive serves every job); C1 alone: an archive
    # holds classes, not compiled code, and the run is ~1/3 cheaper.
    env["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={partial} -XX:TieredStopAtLevel=1 {QUIET}"
    try:
        run = subprocess.run(
            list(command), env=env, capture_output=True, text=True,
            timeout=TRAINING_TIMEOUT_S, check=False,
        )  # fmt: skip
        reason = "" if run.returncode == 0 else (run.stderr.strip().splitlines() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    if not reason and partial.exists() and partial.stat().st_size > 0:
        os.replace(partial, path)
        _prune(path.parent)
        log.info("spark class archive recorded", path=str(path),
                 seconds=round(time.monotonic() - started, 1))  # fmt: skip
        return path
    partial.unlink(missing_ok=True)
    reason = reason or "the JVM wrote no archive"
    log.warning("no Spark class archive: each job's driver loads its classes from jars",
                reason=reason[:300])  # fmt: skip
    with contextlib.suppress(OSError):
        failed.write_text(reason + "\n")  # not tried again for this Java and Spark
    return None


def _prune(folder: Path) -> None:
    archives = sorted(folder.glob("spark-driver-classes-*.jsa"), key=_mtime, reverse=True)
    for old in archives[ARCHIVES_KEPT:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def main(argv: Sequence[str]) -> int:
    """The recorder: `python -m zkcdc.streaming.job.class_archive ARCHIVE TRAINING...`."""
    path = Path(argv[0])
    return 0 if _record(path, path.with_suffix(".failed"), argv[1:]) is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
