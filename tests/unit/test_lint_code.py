"""`make lint` refuses an event type spelt as a string outside its module, and an issue or run
number given as a reason in a comment or docstring; the project's own code has neither."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import lint_code

NAMES = lint_code.event_type_names()


def _found(source: str) -> list[str]:
    tree = ast.parse(source)
    path = Path("x.py")
    return [*lint_code.literal_problems(path, tree, NAMES),
            *lint_code.number_problems(path, source, tree)]  # fmt: skip


def test_an_event_type_spelt_as_a_string_is_refused_with_its_member() -> None:
    [problem] = _found('kind = "ISR_SHRUNK"\n')
    assert "x.py:1" in problem and "EventType.ISR_SHRUNK" in problem
    assert _found('events = [{"type": "LEADER_CHANGED"}]\n')


def test_a_string_that_merely_contains_a_type_or_an_f_string_part_is_not_one() -> None:
    assert not _found('text = "an ISR_SHRUNK event"\nx = f"ISR_SHRUNK{n}"\n')


def test_issue_and_run_numbers_as_reasons_are_refused_in_comments_and_docstrings() -> None:
    assert _found("x = 1  # as issue 37 asked\n")
    assert _found('def f():\n    """Seen in runs 24, 35 and 41."""\n')
    assert _found("# run #12 showed it\n")
    assert not _found("# runs the rules\nx = 'issue 37'  # a string, not prose\n")


def test_the_projects_code_tests_and_benchmarks_have_neither() -> None:
    assert lint_code.problems(list(lint_code.FOLDERS)) == []


def _waits(source: str) -> list[str]:
    return list(lint_code.wait_problems(Path("x.py"), source, ast.parse(source)))


def test_a_hand_rolled_deadline_wait_is_refused() -> None:
    loop = (
        "import time\n"
        "def f(ready):\n"
        "    deadline = time.monotonic() + 30\n"
        "    while not ready():\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.5)\n"
    )
    [problem] = _waits(loop)
    assert "x.py:4" in problem and "wait_until" in problem


def test_a_loop_that_is_not_a_wait_says_so_and_a_loop_without_a_deadline_is_none() -> None:
    marked = (
        "import time\n"
        "def f(step):\n"
        "    ends = time.monotonic() + 60\n"
        "    # not a wait: incidents made in turn for the warm-up's length\n"
        "    while time.monotonic() < ends:\n"
        "        step()\n"
        "        time.sleep(0.5)\n"
    )
    plain = "import time\ndef f(more):\n    while more():\n        time.sleep(0.1)\n"
    paced = (
        "import time\n"
        "def f(rate, start):\n"
        "    due = int(time.monotonic() - start) + 1\n"
        "    while due:\n"
        "        due -= 1\n"
        "        time.sleep(1 / rate)\n"
    )
    assert _waits(marked) == [] and _waits(plain) == [] and _waits(paced) == []
