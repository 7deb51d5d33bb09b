"""`zkcdc history`'s input checked before Spark starts: one line and exit 1 (or click's 2)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from zkcdc.cli import main
from zkcdc.history.cli import parse_time
from zkcdc.streaming.lake.lake_tables import LakeError


def test_times_are_iso_8601_in_utc_or_epoch_milliseconds() -> None:
    assert parse_time("1795473559246") == 1795473559246
    assert parse_time("2026-11-23T22:39:19.246Z") == 1795473559246
    assert parse_time("2026-11-23T22:39:19.246") == 1795473559246  # no zone: UTC
    assert parse_time("2026-11-23T23:39:19.246+01:00") == 1795473559246
    with pytest.raises(LakeError, match="not a time: 'yesterday'"):
        parse_time("yesterday")


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["sql", "SELECT 1"], "give --lake URI", 1),
        (["state", "--at", "2026-11-23T00:00:00Z"], "give --lake URI", 1),
        (["state", "--lake", "l", "--at", "soon"], "not a time: 'soon'", 2),
        (["timeline", "nothing", "--lake", "l"], "TOPIC/PARTITION, 'broker N'", 1),
        (["sql", "SELECT 1", "--lake", "l", "--as-of-version", "-1"], "-1", 2),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, code: int) -> None:
    result = CliRunner().invoke(main, ["history", *args])
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output


def test_an_unknown_history_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZKCDC_HISTORY_LAKES", "x")
    result = CliRunner().invoke(main, ["history", "sql", "SELECT 1"])
    assert result.exit_code == 1
    assert (
        "unknown environment variable ZKCDC_HISTORY_LAKES (did you mean ZKCDC_HISTORY_LAKE?)"
        in result.output
    )
