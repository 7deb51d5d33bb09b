"""`make lint` reports a fixed wait over 0.5 s in the tests unless a comment says the test
needs it by its nature."""

from __future__ import annotations

import sys
from pathlib import Path
from pathlib import Path as _Path

sys.path.insert(0, str(_Path(__file__).resolve().parents[2] / "tools"))
from lint_fixed_waits import problems


def _check(tmp_path: Path, source: str) -> list[str]:
    file = tmp_path / "test_x.py"
    file.write_text(source)
    return problems(file)


def test_an_unexplained_wait_over_half_a_second_is_reported_with_its_line(tmp_path: Path) -> None:
    found = _check(tmp_path, "import time\n\ntime.sleep(2)\n")
    assert len(found) == 1 and ":3: a 2 s wait" in found[0]


def test_a_wait_of_a_length_not_written_out_is_reported(tmp_path: Path) -> None:
    assert _check(tmp_path, "from time import sleep\nsleep(HOLD_S)\n")


def test_a_page_wait_in_milliseconds_counts_as_seconds(tmp_path: Path) -> None:
    assert _check(tmp_path, "page.wait_for_timeout(1000)\n")
    assert not _check(tmp_path, "page.wait_for_timeout(500)\n")


def test_short_polls_and_explained_waits_pass(tmp_path: Path) -> None:
    source = (
        "import time\n"
        "time.sleep(0.5)\n"
        "time.sleep(0.05)\n"
        "time.sleep(DOWN_S)  # fixed wait: an outage held for its set time\n"
        "# fixed wait: a duration that must pass\n"
        "# (and a second comment line)\n"
        "time.sleep(3)\n"
    )
    assert _check(tmp_path, source) == []


def test_a_mark_above_code_does_not_explain_a_later_wait(tmp_path: Path) -> None:
    source = "# fixed wait: for the first\nx = 1\ntime.sleep(3)\n"
    assert len(_check(tmp_path, source)) == 1


def test_the_suite_has_no_unexplained_fixed_wait() -> None:
    tests = Path(__file__).resolve().parents[1]
    assert [p for f in sorted(tests.rglob("*.py")) for p in problems(f)] == []
