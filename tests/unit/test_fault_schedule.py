"""The fault schedule's pure parts (bench/b6_fault_schedule.py): a seed gives one schedule,
with network faults on every pair in both directions and process faults among them; the
checker counts what was lost, doubled or missing, and holds each expected alert to once."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
faults = importlib.import_module("b6_fault_schedule")


def test_a_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert faults.schedule(7, 120, 4) == faults.schedule(7, 120, 4)
    assert faults.schedule(7, 120, 4) != faults.schedule(8, 120, 4)


def test_a_long_schedule_reaches_every_pair_in_both_directions_and_kills_between() -> None:
    drawn, episodes = faults.schedule(3, 120, 240)
    network = {(f.kind, f.proxy, f.stream) for f in drawn if f.kind in faults.NETWORK}
    assert {(p, s) for _, p, s in network} == {
        (p, s) for p in faults.PROXIES for s in ("upstream", "downstream")
    }
    assert {k for k, _, _ in network} == set(faults.NETWORK)
    assert {f.kind for f in drawn} >= set(faults.PROCESS)
    blackholes = [f.hold_s for f in drawn if f.kind == "blackhole"]
    assert min(blackholes) > faults.SESSION_S  # longer than capture's ZooKeeper session
    ends = [f.at_s + f.hold_s for f in drawn]
    assert all(nxt.at_s > end for nxt, end in zip(drawn[1:], ends, strict=False))  # no overlap
    assert len(episodes) == 240 and episodes == sorted(episodes)


def record(seq: int, path: str = "/p", version: int | None = None, skipped: int = 0) -> Any:
    after = None if version is None else {"version": version}
    return {"seq": seq, "path": path, "after": after, "versions_skipped": skipped}


def test_the_checker_counts_duplicates_gaps_unaccounted_and_what_the_topic_lacks() -> None:
    records = [record(1, "/p", 1), record(2, "/p", 3, skipped=1), record(2, "/p", 3),
               record(5, "/p", 4)]  # fmt: skip
    verdict = faults.check_records(records, {"/p": {1, 2, 3, 4, 5}}, logged={1, 2, 5, 6})
    assert (verdict.duplicates, verdict.gaps, verdict.not_on_topic) == (1, 2, 1)
    assert verdict.unaccounted == 1  # version 5: neither seen nor counted as skipped


def alert(status: str, broker: int, started: float, alert_id: str = "") -> dict[str, Any]:
    return {"alert_id": alert_id or f"c:broker_down:broker {broker}:{started}", "rule": "broker_down",
            "entity": f"broker {broker}", "status": status, "started_ms": started}  # fmt: skip


def registration(op: str, ts_ms: int, seq: int, broker: int = 2) -> dict[str, Any]:
    return {"seq": seq, "path": f"/brokers/ids/{broker}", "op": op, "ts_ms": ts_ms}


def test_the_checker_holds_each_expected_alert_to_once_and_to_the_replay() -> None:
    whole = [registration("DELETE", 10_500, 1), registration("CREATE", 14_000, 2)]
    fired = [alert("FIRING", 2, 10_500), alert("RESOLVED", 2, 10_500)]
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 10.0, 14.0)], fired, fired, fired, whole)
    assert (verdict.alerts_once, verdict.expected_alerts, verdict.topic_vs_replay) == (1, 1, 0)
    assert verdict.ok
    twice = [*fired, alert("FIRING", 2, 10_500)]
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 10.0, 14.0)], twice, fired, fired, whole)
    assert (verdict.alerts_once, verdict.topic_vs_replay) == (0, 1)
    assert not verdict.ok


def test_an_episode_capture_saw_late_is_held_to_its_alert_and_one_merged_is_hidden() -> None:
    """A delete a faulted link brought seconds late still starts its episode's down; and a
    registration that lived milliseconds between two episodes (a DELETE while already gone,
    its version counted as skipped) makes the two one down for the rules."""
    late = [registration("DELETE", 15_500, 1), registration("CREATE", 18_800, 2)]
    fired = [alert("FIRING", 2, 15_500), alert("RESOLVED", 2, 15_500)]
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 10.0, 14.0), (3, 40.0, 44.0)], fired, fired, fired, late)
    assert (verdict.expected_alerts, verdict.alerts_once, verdict.lost_episodes) == (1, 1, 1)
    merged = [registration("DELETE", 10_100, 1), registration("DELETE", 14_020, 2),
              registration("CREATE", 18_000, 3)]  # fmt: skip
    fired = [alert("FIRING", 2, 10_100), alert("RESOLVED", 2, 10_100)]
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 10.0, 14.0), (2, 14.0, 18.0)], fired, fired, fired, merged)
    assert (verdict.expected_alerts, verdict.alerts_once) == (1, 1)
    assert (verdict.hidden_episodes, verdict.lost_episodes) == (1, 0) and verdict.ok


def test_the_quick_schedule_has_one_of_each_kind_within_its_minutes() -> None:
    for seed in range(20):
        drawn, episodes = faults.schedule(seed, 1.5, 2, quick=True)
        assert sorted((f.kind, f.proxy) for f in drawn) == sorted(faults.QUICK)
        assert drawn[-1].at_s + drawn[-1].hold_s < 90
        assert len(episodes) == 2


def test_an_episode_capture_did_not_see_whole_is_hidden_seen_at_one_read_or_lost() -> None:
    whole = [registration("DELETE", 10_100, 1), registration("CREATE", 14_000, 2)]
    at_once = [{**r, "ts_ms": 30_000} for r in whole]  # a new czxid seen at one read
    fired = [alert("FIRING", 2, 10_100), alert("RESOLVED", 2, 10_100)]
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 10.0, 14.0)], fired, fired, fired, whole, [])
    assert (verdict.expected_alerts, verdict.alerts_once, verdict.lost_episodes) == (1, 1, 0)
    verdict = faults.Verdict()
    faults.check_alerts(verdict, [(2, 28.0, 31.0)], [], [], [], at_once, [(25.0, 40.0)])
    assert (verdict.expected_alerts, verdict.hidden_episodes, verdict.lost_episodes) == (0, 1, 0)
    assert verdict.ok
    verdict = faults.Verdict()  # outside any fault: a takeover that outlasted its window
    faults.check_alerts(verdict, [(2, 28.0, 31.0)], [], [], [], at_once, [(50.0, 60.0)])
    assert (verdict.one_read_episodes, verdict.lost_episodes) == (1, 0) and verdict.ok
    verdict = faults.Verdict()  # not in the records at all
    faults.check_alerts(verdict, [(2, 28.0, 31.0)], [], [], [], whole, [(50.0, 60.0)])
    assert verdict.lost_episodes == 1 and not verdict.ok


def test_a_capture_that_lived_long_has_its_growth_and_a_point_a_minute() -> None:
    capture = faults.Daemon("capture-0", [], Path("/nonexistent"))
    capture.rss = [(t, 1, 60.0 + t / 3600) for t in range(0, 7260, 5)]  # +1 MB an hour
    capture.rss += [(7000.0 + t, 2, 70.0) for t in range(0, 300, 5)]  # a short second life
    long, short = faults.rss_lives([capture], started=0.0)
    assert long["lived_min"] >= 120 and 1.8 <= long["growth_mb"] <= 2.0
    assert len(long["series"]) == 121 and long["series"][1][0] == 1.0
    assert short["series"] == [] and short["lived_min"] < 10
