"""Writes each benchmark's figures into BENCHMARKS.md from its results file.

Each benchmark's section holds a block between `<!-- bN_name:begin -->` and
`<!-- bN_name:end -->`; this script replaces the block with that benchmark's `render(result)`.
Everything outside the blocks (targets, verdicts, what would close a gap) is written by hand.
A benchmark with no results file keeps its block as it is.

Run: `.venv/bin/python bench/report.py [--quick]` (`make bench` runs it last).
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

from harness import ROOT, load, parser, table

BENCHMARKS = (
    "b0_stack_startup",
    "b1_capture",
    "b1_transactions",
    "b2_scale",
    "b3_alert_job",
    "b4_replay",
    "b5_txnlog",
    "b6_soak",
    "b6_fault_schedule",
    "b7_kraft",
    "b8_ui",
    "b9_cluster_size",
    "b10_lake",
)
# Runs of a benchmark with other flags, kept beside its main one: result -> its module.
VARIANTS = {
    "b2_scale_million": "b2_scale",
    "b8_ui_million": "b8_ui",
    "b9_broker_failure": "b9_broker_failure",  # B9's 1,000,000-partition failure
    "b9_realtime_mode": "b9_realtime_mode",  # B9: a stateless query in Real-time Mode
    "b9_catch_up_python": "b9_catch_up_python",  # B9: a started job's catch-up, no Spark
    "b9_started_job": "b9_started_job",  # B9: a job started against a cluster in sync
}


def fill(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {name}:begin -->).*?(<!-- {name}:end -->)", re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"BENCHMARKS.md has no block for {name}")
    return pattern.sub(lambda m: f"{m.group(1)}\n{body.strip()}\n{m.group(2)}", text)


def summary(results: dict[str, dict[str, Any]]) -> str:
    """Every target with its measured figure: a module's `targets(result)` rows. A variant's
    are left out (B2's and B8's targets are set for 200,000 partitions, and at 1,000,000 the
    issue asks for the figures and the machine's limits), unless its module names the result
    it `SUPERSEDES`: then its rows stand for that result's of the same target where it was
    measured later (B9's started job, measured alone)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for name, result in results.items():
        module = importlib.import_module(VARIANTS.get(name, name))
        main = getattr(module, "SUPERSEDES", None) if name in VARIANTS else name
        if main is None or result["measured"] < results.get(main, {}).get("measured", ""):
            continue
        for what, measured, target, met in getattr(module, "targets", lambda r: [])(result):
            verdict = "met" if met else "**missed**"
            rows[(main, what)] = [f"{main.split('_')[0].upper()}: {what}", measured, target,
                                  verdict]  # fmt: skip
    return table(["target", "measured", "wanted", ""], list(rows.values()))


def main() -> None:
    args = parser(__doc__).parse_args()
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    results = {}
    for name in (*BENCHMARKS, *VARIANTS):
        result = load(name, args.quick)
        if result is None:
            print(f"{name}: no results, block kept", file=sys.stderr)
            continue
        results[name] = result
        module = importlib.import_module(VARIANTS.get(name, name))
        text = fill(text, name, module.render(result))
    text = fill(text, "summary", summary(results))
    out = path if not args.quick else ROOT / "bench" / "results" / "quick" / "BENCHMARKS.md"
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
