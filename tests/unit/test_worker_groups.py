"""Tests that share a module fixture run on one xdist worker (the suite's own scheduler: xdist's
`@group` node-id suffix does not take under pytest 9.2), the rest spread over the workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import worker_groups

CONFTEST = """
import os, tempfile
from pathlib import Path
import pytest
import worker_groups

def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        os.environ[worker_groups.ENV] = str(Path(tempfile.mkdtemp()) / "groups.json")

def pytest_xdist_make_scheduler(config, log):
    return worker_groups.make_scheduler(config, log)

def pytest_collection_modifyitems(items):
    worker_groups.publish({i.nodeid: "shared" for i in items if "shared" in i.fixturenames})
"""

TESTS = """
import os, pytest

@pytest.fixture(scope="module")
def shared():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("n", range(6))
def test_grouped(n, shared):
    assert shared == os.environ["PYTEST_XDIST_WORKER"]
    print("RAN", "grouped", os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("n", range(6))
def test_free(n):
    import time; time.sleep(0.2)
"""


def test_the_groups_a_worker_publishes_are_what_the_scheduler_reads(tmp_path: Path) -> None:
    os.environ[worker_groups.ENV] = str(tmp_path / "groups.json")
    try:
        worker_groups.publish({"a.py::t1": "g", "a.py::t2": "g"})
        assert worker_groups.read(tmp_path / "groups.json") == {"a.py::t1": "g", "a.py::t2": "g"}
    finally:
        del os.environ[worker_groups.ENV]
    assert worker_groups.read(tmp_path / "missing.json") == {}


def test_tests_sharing_a_module_fixture_run_on_one_worker_and_others_spread(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_x.py").write_text(TESTS)
    here = Path(worker_groups.__file__).parent
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-v", "-p",
         "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(here)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = [line.split() for line in run.stdout.splitlines() if " PASSED " in line]
    grouped = {words[0] for words in ran if "test_grouped[" in words[-1]}
    free = {words[0] for words in ran if "test_free[" in words[-1]}
    assert len(grouped) == 1, run.stdout
    assert len(free) >= 2, run.stdout


def test_a_module_groups_every_test_using_any_of_its_fixtures_and_a_package_fixture_comes_first():
    module = "tests/integration/test_x.py"
    # An outer fixture built on an inner one, and a test using only the inner one: one group.
    outer = worker_groups.shared_fixture_group(module, [("module", module), ("module", module)])
    inner = worker_groups.shared_fixture_group(module, [("module", module)])
    assert outer == inner == f"{module}::module"
    # A module fixture from a conftest is still one instance per module: grouped by the module.
    assert worker_groups.shared_fixture_group(module, [("module", "tests")]) == inner
    # A package's stack is one instance for the package: its modules join one group.
    both = [("module", module), ("package", "tests/integration"), ("function", module)]
    assert worker_groups.shared_fixture_group(module, both) == "tests/integration::package"
    assert worker_groups.shared_fixture_group(module, [("package", "")]) == "root::package"
    assert (
        worker_groups.shared_fixture_group(module, [("function", module), ("session", "")]) is None
    )
