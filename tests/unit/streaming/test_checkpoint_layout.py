"""A checkpoint of one state layout never resumes with another: refused in one line that says
how to go on (checkpoint_layout.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
import pytest

from zkcdc.ground.cli_options import ShardsParam
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.bucketed_map import (
    EARLIER_BUCKET_COUNT,
    NEW_BUCKETS,
    BucketLayout,
    Buckets,
)
from zkcdc.streaming.job.checkpoint_layout import (
    MARKER,
    check_layout,
    planned_partitions,
    recorded_buckets,
    recorded_layout,
    settle_layout,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoint_v1"
TODAYS = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoint_v2"


def test_a_new_checkpoint_takes_the_layout_it_is_started_with(tmp_path: Path) -> None:
    check_layout(tmp_path / "cp", 2)
    assert recorded_layout(tmp_path / "cp") == 2
    assert recorded_buckets(tmp_path / "cp") == NEW_BUCKETS
    assert NEW_BUCKETS.layout is BucketLayout.PARTITION_RUNS
    check_layout(tmp_path / "cp", 2)  # resumes
    assert recorded_buckets(tmp_path / "cp") == NEW_BUCKETS


def test_the_fixture_of_this_release_holds_the_layout_new_checkpoints_get() -> None:
    """tests/fixtures/checkpoint_v2 is what a release that changes NEW_BUCKETS must still read
    (test_checkpoint_upgrade.py resumes it); it is never rewritten."""
    assert recorded_layout(TODAYS / "shards-2") == 2
    assert recorded_buckets(TODAYS / "shards-2") == Buckets(BucketLayout.PARTITION_RUNS, 4096)


def test_a_checkpoint_in_runs_of_an_earlier_release_keeps_its_bucket_count(
    tmp_path: Path,
) -> None:
    """Runs named, no count: written when every map had EARLIER_BUCKET_COUNT buckets."""
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / MARKER).write_text('{"shards": 2, "buckets": "partition-runs"}\n')
    check_layout(tmp_path / "cp", 2)
    earlier = Buckets(BucketLayout.PARTITION_RUNS, EARLIER_BUCKET_COUNT)
    assert recorded_buckets(tmp_path / "cp") == earlier != NEW_BUCKETS


@pytest.mark.parametrize("layout", ["shards-2", "one-group"])
def test_the_earlier_releases_checkpoints_keep_each_partition_by_its_hash(
    tmp_path: Path, layout: str
) -> None:
    """Its marker names no buckets (or it has none): read as it was written, and resuming it
    does not rename its layout."""
    by_hash = Buckets(BucketLayout.KEY_HASH, EARLIER_BUCKET_COUNT)
    checkpoint = FIXTURE / layout
    assert recorded_buckets(checkpoint) == by_hash
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / MARKER).write_text('{"shards": 2}\n')
    check_layout(tmp_path / "cp", 2)
    assert recorded_buckets(tmp_path / "cp") == by_hash
    assert recorded_buckets(old_release_checkpoint(tmp_path / "before")) == by_hash


@pytest.mark.parametrize(
    ("marker", "said"),
    [('{"shards": 2, "buckets": "by-moon"}', "by-moon"), ("[2]", "not an object"),
     ('{"buckets": "key-hash"}', "shards"),
     ('{"shards": 2, "buckets": "partition-runs", "bucket_count": "many"}', "'many'"),
     ('{"shards": 2, "buckets": "partition-runs", "bucket_count": 0}', "bucket_count 0"),
     ('{"shards": 2, "buckets": "partition-runs", "bucket_count": 4096.5}', "4096.5")],
)  # fmt: skip
def test_a_layout_this_release_cannot_read_is_one_line(
    tmp_path: Path, marker: str, said: str
) -> None:
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / MARKER).write_text(marker)
    with pytest.raises(StreamingError, match=said) as refused:
        settle_layout(tmp_path / "cp", None, "local[2]")
        recorded_buckets(tmp_path / "cp")
    assert "\n" not in str(refused.value)


def old_release_checkpoint(path: Path) -> Path:
    """What a release before shards leaves: the query's offsets, no layout file."""
    (path / "alerts" / "offsets").mkdir(parents=True)
    (path / "alerts" / "offsets" / "0").write_text("v1\n{}\n")
    return path


@pytest.mark.parametrize("shards", [1, 2, 8])
def test_a_checkpoint_of_the_one_group_release_is_refused_in_one_line_saying_what_to_do(
    tmp_path: Path, shards: int
) -> None:
    checkpoint = old_release_checkpoint(tmp_path / "cp")
    with pytest.raises(StreamingError) as refused:
        check_layout(checkpoint, shards)
    line = str(refused.value)
    assert "\n" not in line
    assert "--shards 0" in line and "zkcdc replay" in line and "--starting-offsets earliest" in line
    assert not (checkpoint / MARKER).exists()  # refused: nothing written
    check_layout(checkpoint, 0)  # it resumes as it was


@pytest.mark.parametrize(
    ("marker", "said"),
    [('{"shards": 3, "buckets": "partition-runs", "bucket_count": 4096}',
      "alert-stage.json says 3 partition shards (--shards 3), but its query was planned with 2"),
     ('{"shards": 0}', "says one group per cluster (--shards 0), but its query was planned with 2"),
     (None, "no alert-stage.json: so one group per cluster (--shards 0), but its query was "
      "planned with 2")],
)  # fmt: skip
def test_a_marker_that_is_not_its_states_is_refused_in_one_line(
    tmp_path: Path, marker: str | None, said: str
) -> None:
    """Today's two-shard checkpoint under a marker edited, copied from another checkpoint or
    gone: the job would route records to shards whose state is elsewhere (an alert lost, or
    one of a cluster that just appeared) or meet Spark's error deep in its start."""
    checkpoint = tmp_path / "cp"
    shutil.copytree(TODAYS / "shards-2", checkpoint)
    if marker is None:
        (checkpoint / MARKER).unlink()
    else:
        (checkpoint / MARKER).write_text(marker)
    with pytest.raises(StreamingError, match=re.escape(said)) as refused:
        settle_layout(checkpoint, None, "local[2]")
    line = str(refused.value)
    assert "\n" not in line and "start afresh" in line and "zkcdc replay" in line


def test_the_releases_checkpoints_match_their_markers() -> None:
    assert planned_partitions(TODAYS / "shards-2") == 2
    assert planned_partitions(FIXTURE / "shards-2") == 2
    assert planned_partitions(FIXTURE / "one-group") == 1
    for checkpoint in (TODAYS / "shards-2", FIXTURE / "shards-2", FIXTURE / "one-group"):
        settle_layout(checkpoint, None, "local[2]")  # resumes as it is


def test_shards_changed_between_runs_are_refused(tmp_path: Path) -> None:
    check_layout(tmp_path / "cp", 4)
    with pytest.raises(StreamingError, match="--shards 4"):
        check_layout(tmp_path / "cp", 2)


def test_an_unreadable_layout_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / MARKER).write_text("{not json")
    with pytest.raises(StreamingError, match=MARKER) as refused:
        check_layout(tmp_path / "cp", 0)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("master", "shards"),
    [("local[2]", 2), ("local[1]", 2), ("local[8]", 8), ("local[4, 3]", 4), ("spark://h:7077", 2)],
)
def test_auto_gives_a_new_checkpoint_a_shard_a_core_and_at_least_two(
    tmp_path: Path, master: str, shards: int
) -> None:
    assert settle_layout(tmp_path / "cp", None, master) == shards
    assert recorded_layout(tmp_path / "cp") == shards, "kept in the checkpoint"


def test_auto_resumes_a_checkpoint_in_the_layout_it_holds(tmp_path: Path) -> None:
    check_layout(tmp_path / "one-group", 0)
    assert settle_layout(tmp_path / "one-group", None, "local[2]") == 0
    old = tmp_path / "before-shards"
    (old / "alerts" / "offsets").mkdir(parents=True)  # progress, no marker: one group
    assert settle_layout(old, None, "local[8]") == 0


def test_a_layout_asked_for_is_still_refused_on_a_checkpoint_of_another(tmp_path: Path) -> None:
    settle_layout(tmp_path / "cp", None, "local[2]")
    with pytest.raises(StreamingError, match="resume it with --shards 2"):
        settle_layout(tmp_path / "cp", 0, "local[2]")


@pytest.mark.parametrize(("given", "taken"), [("auto", None), ("AUTO", None), ("0", 0), ("16", 16)])
def test_the_shards_flag_takes_auto_or_a_count(given: str, taken: int | None) -> None:
    assert ShardsParam().convert(given, None, None) == taken


@pytest.mark.parametrize("given", ["-1", "257", "two"])
def test_a_bad_shards_flag_is_refused(given: str) -> None:
    with pytest.raises(click.BadParameter):
        ShardsParam().convert(given, None, None)
