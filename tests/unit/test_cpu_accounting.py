"""Each test's CPU seconds (tests/cpu_accounting.py) count what its commands and the processes
under them used, and `make test-times` ranks the files by them."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

from cpu_accounting import CpuPerTest

BENCH = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(BENCH))
test_times = importlib.import_module("test_times")

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_command_the_worker_reaps_counts_in_full():
    cpu = CpuPerTest(interval_s=0.1)
    try:
        start = cpu.mark()
        subprocess.run([sys.executable, "-c", SPIN.format(s=0.6)], check=True)
        assert cpu.since(start) >= 0.6
    finally:
        cpu.stop()


def test_a_process_below_a_command_that_waits_for_it_counts_once():
    """As a `zkcdc` command's Spark driver: the command waits for it, so its CPU reaches the
    worker's RUSAGE_CHILDREN with the command's, and its samples must not add it again."""
    waits = textwrap.dedent(f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {SPIN.format(s=0.8)!r}], check=True)
        """)  # fmt: skip
    cpu = CpuPerTest(interval_s=0.1)
    try:
        start = cpu.mark()
        subprocess.run([sys.executable, "-c", waits], check=True)
        used = cpu.since(start)
        # Twice would be 1.6 and more; the two interpreters' starts add ~0.1-0.3.
        assert 0.8 <= used < 1.5, used
    finally:
        cpu.stop()


def test_a_process_below_a_running_command_counts_from_its_samples():
    """As a Spark driver under a job the test leaves running: its CPU is in no reaped figure
    of the worker's yet, so its samples count."""
    driver = SPIN.format(s=0.8) + 'print("done", flush=True)\nimport sys\nsys.stdin.read()\n'
    job = textwrap.dedent(f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {driver!r}], check=True)
        """)  # fmt: skip
    cpu = CpuPerTest(interval_s=0.1)
    start = cpu.mark()
    command = subprocess.Popen(
        [sys.executable, "-c", job], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert command.stdout is not None and command.stdout.readline() == "done\n"
        used = cpu.since(start)  # the driver still runs, and is sampled now
        assert used >= 0.8, used
    finally:
        command.communicate("")  # the driver reads its end of input, and both end
        cpu.stop()


def test_the_time_table_ranks_files_by_cpu_when_the_xml_has_it(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite time="60">'
        '<testcase classname="tests.unit.test_a" name="cheap_and_slow" time="50">'
        '<properties><property name="cpu_s" value="1.0"/></properties></testcase>'
        '<testcase classname="tests.integration.test_b" name="costly" time="20">'
        '<properties><property name="cpu_s" value="30.0"/></properties></testcase>'
        "</testsuite></testsuites>"
    )
    text = test_times.table(test_times.read(junit), top=5)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert rows[0].startswith("| 30 | 97% | 20 | 1 | `integration/test_b.py` | costly (30)")
    assert rows[1].startswith("| 1 | 3% | 50 | 1 | `unit/test_a.py`")
    assert "0.5 CPU-minutes" in text


def test_the_time_table_says_when_each_worker_ended_and_how_long_it_was_busy(tmp_path):
    junit = tmp_path / "junit.xml"
    case = ('<testcase classname="tests.unit.test_a" name="t{n}" time="{s}"><properties>'
            '<property name="worker" value="{w}"/><property name="started" value="{at}"/>'
            "</properties></testcase>")  # fmt: skip
    junit.write_text(
        '<testsuites><testsuite time="200">'
        + case.format(n=1, s=60, w="gw0", at=1000.0)
        + case.format(n=2, s=30, w="gw0", at=1090.0)
        + case.format(n=3, s=150, w="gw1", at=1000.5)
        + "</testsuite></testsuites>"
    )
    run = test_times.read(junit)
    assert run.workers == {"gw0": (120.0, 90.0), "gw1": (150.5, 150.0)}
    assert "gw0 2.0 min (1.5), gw1 2.5 min (2.5)." in test_times.table(run, top=5)
