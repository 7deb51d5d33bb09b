"""`make lint`: what ruff and mypy cannot see.

- **Event types are enum members.** A string literal that spells an event type
  (`"ISR_SHRUNK"`) anywhere but the module that defines them (`zkcdc/ground/change_types.py`)
  is refused: `EventType.ISR_SHRUNK` fails where it is misspelt, the string at run time.
- **Comments say why in the reader's terms.** An issue number ("issue 37") or a run number
  ("runs 24, 35") in a comment or docstring is refused: a reader of the repository cannot
  follow either. Say the cause, or name a test.
- **One way to wait.** A `while` loop that sleeps and watches a deadline of its own
  (`deadline = time.monotonic() + timeout` ...) is refused outside `zkcdc/ground/waiting.py`:
  wait with `waiting.wait_until`. A loop that is not a wait (a deadline that moves while work
  progresses, a work budget, a retry's backoff) says so with "not a wait:" and why on its line
  or the comment lines above it.

    python tools/lint_code.py [FOLDER ...]    (default: the project's code, tests and bench)
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

from lint_fixed_waits import marked  # tools/: the script's own folder

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("zkcdc", "capture", "streaming", "tests", "bench", "tools")
CONTRACT_MODULE = Path("zkcdc/ground/change_types.py")
WAIT_MODULE = Path("zkcdc/ground/waiting.py")
NOT_A_WAIT = "not a wait:"
SLEEPS = {"sleep", "wait", "wait_for_timeout"}
CLOCKS = {"monotonic", "time", "perf_counter", "now", "_now", "clock", "_clock"}
# zkcdc/capture and zkcdc/streaming are links to capture/ and streaming/: read once.
LINKS = (Path("zkcdc/capture"), Path("zkcdc/streaming"))
NUMBERED = re.compile(r"\bissues?\s+#?\d+|\bruns?\s+#?\d+(\s*(,|and|-|\u2013)\s*\d+)*\b", re.I)


def event_type_names() -> frozenset[str]:
    tree = ast.parse((ROOT / CONTRACT_MODULE).read_text())
    [enum] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EventType"]
    return frozenset(
        t.id for n in enum.body if isinstance(n, ast.Assign) for t in n.targets
        if isinstance(t, ast.Name)
    )  # fmt: skip


def literal_problems(path: Path, tree: ast.AST, names: frozenset[str]) -> Iterator[str]:
    inside_fstring = {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
        for part in node.values
    }  # fmt: skip
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in names and id(node) not in inside_fstring
        ):  # fmt: skip
            yield f'{path}:{node.lineno}: "{node.value}": write EventType.{node.value}'


def prose(source: str, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every comment and docstring, with its line."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text and node.body:
                yield node.body[0].lineno, text


def number_problems(path: Path, source: str, tree: ast.AST) -> Iterator[str]:
    for line, text in prose(source, tree):
        for match in NUMBERED.finditer(text):
            yield f"{path}:{line}: {match.group(0)!r}: say the cause, or name a test"


def _deadlines(function: ast.AST) -> set[str]:
    """Names a function sets to a time ahead: `x = <clock call> + <anything>`."""
    out = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
            and isinstance(node.value.op, ast.Add) and isinstance(node.value.left, ast.Call)
            and _called(node.value.left) in CLOCKS
        ):  # fmt: skip
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else str(getattr(func, "id", ""))


def _sleeps(loop: ast.While) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) in SLEEPS for n in ast.walk(loop))


def wait_problems(path: Path, source: str, tree: ast.AST) -> Iterator[str]:
    lines = source.splitlines()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        deadlines = _deadlines(function)
        for loop in ast.walk(function):
            if not isinstance(loop, ast.While) or not deadlines or not _sleeps(loop):
                continue
            names = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)}
            if names & deadlines and not marked(lines, loop.lineno, NOT_A_WAIT):
                yield f"{path}:{loop.lineno}: a hand-rolled deadline wait: use waiting.wait_until"


def files(folders: list[str]) -> Iterator[Path]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if not any(relative.is_relative_to(link) for link in LINKS) and ".venv" not in str(
                relative
            ):
                yield relative


def problems(folders: list[str]) -> list[str]:
    names = event_type_names()
    out: list[str] = []
    for path in files(folders):
        source = (ROOT / path).read_text()
        tree = ast.parse(source)
        if path != CONTRACT_MODULE:
            out += literal_problems(path, tree, names)
        if path != Path("tools/lint_code.py"):
            out += number_problems(path, source, tree)
        if path != WAIT_MODULE:
            out += sorted(set(wait_problems(path, source, tree)))
    return out


def main(argv: list[str]) -> int:
    found = problems(argv or list(FOLDERS))
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
