"""`make lint`: every fixed wait longer than 0.5 s in the tests is one the test needs by its
nature (an outage held for a set time, a duration that must pass) and says so beside it.

A call to `sleep` (time.sleep, asyncio.sleep, a bare sleep) or Playwright's `wait_for_timeout`
whose length is not a literal of at most 0.5 s (500 ms) must have a comment holding
"fixed wait:" on its line or on the comment lines just above it. Everything else waits for an
event: `wait_until`, a log line, a record, a process's exit.

    python tools/lint_fixed_waits.py [FOLDER ...]    (default: tests)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

MARK = "fixed wait:"
LIMIT_S = 0.5


def _length_s(call: ast.Call, milliseconds: bool) -> float | None:
    """The literal length of the wait in seconds, or None when it is not a literal."""
    if not call.args or not isinstance(call.args[0], ast.Constant):
        return None
    value = call.args[0].value
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return value / 1000 if milliseconds else float(value)


def _waits(tree: ast.AST) -> Iterator[tuple[ast.Call, bool]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        if name == "sleep":
            yield node, False
        elif name == "wait_for_timeout":
            yield node, True


def marked(lines: list[str], line_no: int, mark: str) -> bool:
    """The line's own text, or the comment lines right above it, hold `mark` (an explanation
    a lint accepts: "fixed wait:", "not a wait:")."""
    if mark in lines[line_no - 1]:
        return True
    above = line_no - 2
    while above >= 0 and lines[above].strip().startswith("#"):
        if mark in lines[above]:
            return True
        above -= 1
    return False


def _explained(lines: list[str], line_no: int) -> bool:
    return marked(lines, line_no, MARK)


def problems(file: Path) -> list[str]:
    text = file.read_text()
    lines = text.splitlines()
    found = []
    for call, milliseconds in _waits(ast.parse(text, str(file))):
        length = _length_s(call, milliseconds)
        if length is not None and length <= LIMIT_S:
            continue
        end = call.end_lineno or call.lineno
        if any(_explained(lines, n) for n in range(call.lineno, end + 1)):
            continue
        shown = "a wait of unknown length" if length is None else f"a {length:g} s wait"
        found.append(
            f"{file}:{call.lineno}: {shown}: wait for an event instead, or say why the test "
            f'needs this wait in a "# {MARK} ..." comment beside it'
        )
    return found


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or [Path("tests")]
    found = [p for folder in folders for f in sorted(folder.rglob("*.py")) for p in problems(f)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
