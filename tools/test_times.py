"""Where the suite's time goes: the JUnit XML a `make test` run writes
(`test-artifacts/junit.xml`) turned into a per-file table, written into TESTING.md between
`<!-- test-times:begin -->` and `<!-- test-times:end -->`.

A test's time in the XML is its setup, call and teardown together, so a session or module
fixture's start-up counts in the first test that used it. With workers, the files' times add up
to more than the run's wall time: they ran side by side. On two cores the suite is bound by CPU,
so where the XML has each test's CPU seconds (its `cpu_s` property, tests/cpu_accounting.py)
the table is sorted by them: that is what a cheaper test gives back to the run. Where it has
each test's worker and start (`worker`, `started`), a line says how long each worker was busy
and when its last test ended: a worker that ends long before the others is a run's idle tail.

Run: `make test-times` (after `make test`), or
`.venv/bin/python tools/test_times.py [JUNIT_XML] [--top N] [--print]`.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- test-times:begin -->", "<!-- test-times:end -->"


@dataclass
class FileTimes:
    tests: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    failed: int = 0
    skipped: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)
    costliest: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Run:
    files: dict[str, FileTimes]
    wall_s: float
    tests: int
    failures: int
    skipped: int
    # per xdist worker: (its last test's end, in s after the run's first test began; busy s)
    workers: dict[str, tuple[float, float]] = field(default_factory=dict)


def _file_of(case: ElementTree.Element) -> str:
    """`tests.integration.test_replay` (the classname) -> `integration/test_replay.py`."""
    classname = case.get("classname", "")
    parts = classname.split(".")
    # A class inside a module: its name starts with an upper-case letter.
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    if parts and parts[0] == "tests":
        parts = parts[1:]
    return "/".join(parts) + ".py" if parts else "(unknown)"


def read(junit: Path) -> Run:
    root = ElementTree.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    files: dict[str, FileTimes] = defaultdict(FileTimes)
    ran: dict[str, list[tuple[float, float]]] = defaultdict(list)
    wall = 0.0
    for suite in suites:
        wall += float(suite.get("time", 0) or 0)
        for case in suite.iter("testcase"):
            times = files[_file_of(case)]
            seconds = float(case.get("time", 0) or 0)
            times.tests += 1
            times.seconds += seconds
            times.slowest.append((seconds, case.get("name", "")))
            worker, started = _property(case, "worker"), _property(case, "started")
            if worker and started:
                ran[worker].append((float(started), seconds))
            cpu = _cpu_of(case)
            if cpu is not None:
                times.cpu_s += cpu
                times.costliest.append((cpu, case.get("name", "")))
            if case.find("failure") is not None or case.find("error") is not None:
                times.failed += 1
            if case.find("skipped") is not None:
                times.skipped += 1
    return Run(
        dict(files),
        wall,
        sum(t.tests for t in files.values()),
        sum(t.failed for t in files.values()),
        sum(t.skipped for t in files.values()),
        _workers(ran),
    )


def _property(case: ElementTree.Element, name: str) -> str | None:
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value")
    return None


def _workers(ran: dict[str, list[tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    if not ran:
        return {}
    first = min(start for tests in ran.values() for start, _ in tests)
    return {
        worker: (max(start + s for start, s in tests) - first, sum(s for _, s in tests))
        for worker, tests in sorted(ran.items())
    }


def _cpu_of(case: ElementTree.Element) -> float | None:
    try:
        value = _property(case, "cpu_s")
        return None if value is None else float(value)
    except ValueError:
        return None


def table(run: Run, top: int) -> str:
    """The files ranked by the CPU their tests used where the XML has it, else by time."""
    by_cpu = any(t.costliest for t in run.files.values())

    def weight(times: FileTimes) -> float:
        return times.cpu_s if by_cpu else times.seconds

    total = sum(weight(t) for t in run.files.values()) or 1.0
    rows = sorted(run.files.items(), key=lambda item: -weight(item[1]))
    lines = [
        f"Run of {run.tests} tests ({run.failures} failed, {run.skipped} skipped): "
        f"{run.wall_s / 60:.1f} min of wall time; the files' times add up to "
        f"{sum(t.seconds for t in run.files.values()) / 60:.1f} min (tests run side by side).",
    ]
    if run.workers:
        lines.append("Each worker's last test ended (busy): " + ", ".join(
            f"{w} {end / 60:.1f} min ({busy / 60:.1f})" for w, (end, busy) in run.workers.items()
        ) + ".")  # fmt: skip
    if by_cpu:
        lines += [
            f"The tests used {total / 60:.1f} CPU-minutes (the shared stack's own work not "
            "counted).",
            "",
            "| CPU s | share | wall s | tests | file | costliest test (CPU s) |",
            "|---:|---:|---:|---:|---|---|",
        ]
    else:
        lines += ["", "| s | share | tests | file | slowest test (s) |", "|---:|---:|---:|---|---|"]

    def row(used: float, seconds: float, tests: int, what: str) -> str:
        wall = f" {seconds:.0f} |" if by_cpu else ""
        return f"| {used:.0f} | {100 * used / total:.0f}% |{wall} {tests} | {what} |"

    for name, times in rows[:top]:
        worst, test = max((times.costliest if by_cpu else times.slowest) or [(0.0, "")])
        lines.append(row(weight(times), times.seconds, times.tests,
                         f"`{name}` | {_short(test)} ({worst:.0f})"))  # fmt: skip
    rest = [times for _, times in rows[top:]]
    if rest:
        lines.append(row(sum(weight(t) for t in rest), sum(t.seconds for t in rest),
                         sum(t.tests for t in rest), f"{len(rest)} other files |"))  # fmt: skip
    return "\n".join(lines)


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def write_into(document: Path, text: str) -> None:
    body = document.read_text()
    block = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not block.search(body):
        raise SystemExit(f"{document} has no {BEGIN} ... {END} block")
    document.write_text(block.sub(lambda _: f"{BEGIN}\n{text}\n{END}", body))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="?", type=Path, default=ROOT / "test-artifacts/junit.xml")
    parser.add_argument("--top", type=int, default=25, help="files listed one by one")
    parser.add_argument("--print", action="store_true", help="print only; TESTING.md unchanged")
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"test_times: no {args.junit}: run `make test` first", file=sys.stderr)
        return 1
    try:
        run = read(args.junit)
    except ElementTree.ParseError as exc:
        print(f"test_times: {args.junit} is not a JUnit XML file: {exc}", file=sys.stderr)
        return 1
    text = table(run, args.top)
    print(text)
    if not args.print:
        write_into(ROOT / "TESTING.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
