"""What a timeline is about, read from the command line."""

from __future__ import annotations

import pytest

from zkcdc.streaming.lake.history_queries import Subject, utc_text
from zkcdc.streaming.lake.lake_tables import LakeError


@pytest.mark.parametrize(
    ("words", "subject"),
    [
        (("controller",), Subject("controller")),
        (("broker", "7"), Subject("broker", number=7)),
        (("broker 7",), Subject("broker", number=7)),
        (("orders/3",), Subject("partition", topic="orders", number=3)),
        (("a/b/12",), Subject("partition", topic="a/b", number=12)),
    ],
)
def test_subjects(words: tuple[str, ...], subject: Subject) -> None:
    assert Subject.parse(words) == subject


@pytest.mark.parametrize("words", [("broker",), ("broker", "x"), ("orders",), ("",), ("t/-1",)])
def test_a_subject_that_is_none_of_them_is_one_line(words: tuple[str, ...]) -> None:
    with pytest.raises(LakeError, match="TOPIC/PARTITION, 'broker N' or 'controller'"):
        Subject.parse(words)


def test_times_are_utc_to_the_millisecond() -> None:
    assert utc_text(1795473559246) == "2026-11-23T22:39:19.246+00:00"
