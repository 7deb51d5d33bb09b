"""BENCHMARKS.md's figures come from the results files: each benchmark renders its result and
says which targets it met, and the report fills exactly the marked blocks."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

report = importlib.import_module("report")


def test_the_report_replaces_only_the_marked_block():
    text = "intro\n<!-- b9_x:begin -->\nold\n<!-- b9_x:end -->\nverdict by hand\n"
    assert report.fill(text, "b9_x", "new figures") == (
        "intro\n<!-- b9_x:begin -->\nnew figures\n<!-- b9_x:end -->\nverdict by hand\n"
    )
    with pytest.raises(SystemExit, match="no block for b8_y"):
        report.fill(text, "b8_y", "x")


@pytest.mark.parametrize("name", report.BENCHMARKS)
def test_each_committed_result_renders_and_judges_its_targets(name):
    result = json.loads((BENCH / "results" / f"{name}.json").read_text())
    module = importlib.import_module(name)
    text = module.render(result)
    assert result["command"] in text and "|---|" in text
    for what, measured, target, met in getattr(module, "targets", lambda r: [])(result):
        assert what and measured and target and isinstance(met, bool)


def test_benchmarks_md_has_a_block_for_every_benchmark_and_the_summary():
    text = (BENCH.parent / "BENCHMARKS.md").read_text()
    for name in (*report.BENCHMARKS, "summary"):
        assert f"<!-- {name}:begin -->" in text and f"<!-- {name}:end -->" in text
