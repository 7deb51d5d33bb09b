"""A checkpoint of one state layout never resumes with another: refused in one line that says
how to go on (checkpoint_layout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.checkpoint_layout import MARKER, check_layout, recorded_layout


def test_a_new_checkpoint_takes_the_layout_it_is_started_with(tmp_path: Path) -> None:
    check_layout(tmp_path / "cp", 2)
    assert recorded_layout(tmp_path / "cp") == 2
    check_layout(tmp_path / "cp", 2)  # resumes


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
