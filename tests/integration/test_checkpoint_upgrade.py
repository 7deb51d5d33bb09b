"""Checkpoints written by earlier releases resume under today's: the alerts each gave before
its stop and those it gives after are, together, the replay's of the whole log, none lost and
none twice. tests/fixtures/checkpoint_v1: the job stopped halfway through
tests/fixtures/event_log_v1, in each layout, its state pickled Python objects;
tests/fixtures/checkpoint_v2: the same stop, its state Avro records in 4,096 buckets by runs of
a topic's partitions (the layout new checkpoints get). Each was written in another folder
(/tmp/ckfix...), so it also resumes moved (streaming/job/moved_checkpoint.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import fastavro
import pytest
from alerts_harness import alerts_of

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "checkpoint_v1"
TODAYS = "checkpoint_v2"  # the release whose checkpoints this one writes


def _moved(checkpoint: Path, old: str, new: Path) -> None:
    """The file source's list of files read names the folder they were in: the one they were
    written in is now `new` (Hadoop's checksum beside a rewritten file goes with the old text)."""
    for listing in (checkpoint / "alerts" / "sources" / "0").glob("[0-9]*"):
        listing.write_text(listing.read_text().replace(f"file://{old}/", f"file://{new}/"))
        (listing.parent / f".{listing.name}.crc").unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("release", "layout", "shards"),
    [("checkpoint_v1", "one-group", "0"), ("checkpoint_v1", "shards-2", "2"),
     ("checkpoint_v2", "shards-2", "2")],
)  # fmt: skip
def test_a_checkpoint_of_an_earlier_release_resumes_with_no_alert_lost_or_twice(
    tmp_path: Path, release: str, layout: str, shards: str
) -> None:
    about = json.loads((FIXTURES / f"{release}.json").read_text())
    written = FIXTURES / release
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    shutil.copytree(FIXTURE / "log", log)
    shutil.copytree(written / layout, checkpoint)
    _moved(checkpoint, about["source_folder"][layout], log)
    after = tmp_path / "after.jsonl"
    # An earlier release's checkpoint: the rest of the log in two files, each read by a run of
    # its own, the first resuming that release's state, the second the state the first wrote
    # in today's form. Today's own checkpoint: one run reads it all.
    pieces = 1 if release == TODAYS else 2
    for part in _parts(next((FIXTURE / "later").iterdir()), log, pieces):
        run = subprocess.run(
            [sys.executable, "-m", "zkcdc", "stream", "alerts", "--event-log", str(log),
             "--checkpoint", str(checkpoint), "--available-now", "--no-publish",
             "--alerts-out", str(after), "--shards", shards],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert run.returncode == 0, f"after {part.name}: {run.stderr[-3000:]}"
    before = alerts_of(written / f"{layout}.alerts.jsonl")
    assert before and alerts_of(after), "the resumed job gave no alert after the stop"
    whole = alerts_of(FIXTURES / "event_log_v1.alerts.jsonl")
    assert before + alerts_of(after) == whole


def _parts(log_file: Path, folder: Path, pieces: int) -> Iterator[Path]:
    """`log_file`'s records as `pieces` event-log files in `folder`, each put there only when
    the one before has been read (the generator's next step)."""
    with log_file.open("rb") as f:
        reader = fastavro.reader(f)
        schema, records = reader.writer_schema, list(reader)
    cuts = [len(records) * i // pieces for i in range(pieces + 1)]
    for part in (records[a:b] for a, b in pairwise(cuts)):
        out = folder / f"fixture.{part[0]['seq']:020d}.avro"
        with out.open("wb") as f:
            fastavro.writer(f, schema, part)
        yield out


def test_a_job_that_died_after_delivering_a_batch_but_before_committing_it_resumes(
    tmp_path: Path,
) -> None:
    """Death between the sinks taking a micro-batch and Spark committing it: the restart runs
    that batch again, delivers none of it (the ledger names it) and still commits its state,
    so the next batch starts from it. Stateful stages in shards, the layout whose stores are
    most."""
    log, checkpoint, alerts = tmp_path / "log", tmp_path / "checkpoint", tmp_path / "a.jsonl"
    shutil.copytree(FIXTURE / "log", log)  # the log's first half; its second is FIXTURE/later

    def run() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "zkcdc", "stream", "alerts", "--event-log", str(log),
             "--checkpoint", str(checkpoint), "--available-now", "--no-publish",
             "--alerts-out", str(alerts), "--shards", "2"],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

    run()
    commits = checkpoint / "alerts" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # as if killed before Spark wrote them
        (commits / name).unlink(missing_ok=True)
    delivered = alerts_of(alerts)
    assert delivered, "the first half of the log gave no alert"
    for later in (FIXTURE / "later").iterdir():
        shutil.copy(later, log / later.name)
    run()
    assert alerts_of(alerts) == alerts_of(FIXTURES / "event_log_v1.alerts.jsonl")


def test_state_that_spark_alone_finds_damaged_ends_the_job_in_one_line_saying_what_to_do(
    tmp_path: Path,
) -> None:
    """Damage the check before Spark's start leaves to Spark (a RocksDB changelog's insides,
    no snapshot under it: streaming/job/checkpoint_files.py): the query fails loading the
    state, and the job ends with one line naming Spark's error and how to start afresh, not a
    flood of Java stacks before it, no alert given."""
    from zkcdc.streaming.job.saved_state import AFRESH

    about = json.loads((FIXTURES / f"{TODAYS}.json").read_text())
    log, checkpoint, after = tmp_path / "log", tmp_path / "checkpoint", tmp_path / "after.jsonl"
    shutil.copytree(FIXTURE / "log", log)
    shutil.copytree(FIXTURES / TODAYS / "shards-2", checkpoint)
    _moved(checkpoint, about["source_folder"]["shards-2"], log)
    for later in (FIXTURE / "later").iterdir():
        shutil.copy(later, log / later.name)
    store = checkpoint / "alerts" / "state" / "0" / "0"
    (store / "1.zip").unlink()
    (store / "1.changelog").write_bytes(b"\x00\x00\x00\x07damaged")
    run = subprocess.run(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--event-log", str(log),
         "--checkpoint", str(checkpoint), "--available-now", "--no-publish",
         "--alerts-out", str(after)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    # Spark's start said ~25 lines; the task's failure, once each by the executor, the task
    # set and the file sink's writer with the whole Java stack, said ~400 more. What may be
    # left: a second task's load, interrupted as the job ends, from RocksDB's own logger. Every
    # line but the one-line error is a JSON log line, a Java stack inside the event it goes with.
    logged = [json.loads(line) for line in run.stderr.splitlines() if "zkcdc: error:" not in line]
    stacks = [frame for line in logged for frame in line.get("exception", "").splitlines()
              if frame.startswith("\tat ")]  # fmt: skip
    assert len(stacks) < 100, f"a flood of Java stacks on stderr:\n{run.stderr[-3000:]}"
    said = [line for line in run.stderr.splitlines() if "zkcdc: error:" in line]
    assert len(said) == 1 and "CANNOT_LOAD_STATE_STORE" in said[0], run.stderr[-3000:]
    assert said[0].endswith(AFRESH), said[0]
    assert not after.exists() or not alerts_of(after)
