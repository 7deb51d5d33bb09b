"""The incident view's timeline gives the state and alerts the Spark job gave for the same log
(the kept fixture's golden files), and the state at any moment is the records up to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.view.incident import build
from zkcdc.view.report import incident_page

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _records() -> list[dict[str, Any]]:
    return list(read_records(FIXTURES / "event_log_v1", lambda damage: None))


def _golden(kind: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / f"event_log_v1.{kind}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _without(value: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


def test_the_timeline_ends_in_the_state_the_spark_job_kept_for_the_same_log() -> None:
    timeline = build(_records())
    end = timeline.state_at(timeline.end_ms or 0)
    made = sorted(json.dumps(_without(v, "updated_ms", "expected"), sort_keys=True)
                  for v in end.values())  # fmt: skip
    golden = sorted(json.dumps(_without(v, "updated_ms"), sort_keys=True) for v in _golden("state"))
    assert made == golden


def test_the_timeline_raises_the_alerts_the_spark_job_raised_for_the_same_log() -> None:
    timeline = build(_records())
    made = sorted(
        json.dumps(a, sort_keys=True) for a in timeline.alerts_until(timeline.end_ms or 0)
    )
    assert made == sorted(json.dumps(a, sort_keys=True) for a in _golden("alerts"))


def test_the_state_at_a_moment_is_that_of_the_records_up_to_it_alone() -> None:
    records = _records()
    timeline = build(records)
    for t in (records[60]["ts_ms"], records[200]["ts_ms"], records[330]["ts_ms"]):
        alone = build([r for r in records if r["ts_ms"] <= t])
        assert timeline.state_at(t) == alone.state_at(t)


def test_a_report_is_one_page_with_nothing_fetched_from_elsewhere() -> None:
    page = incident_page(build(_records()), RuleSettings(), "incident <x>")
    assert page.startswith("<!doctype html>") and "incident &lt;x&gt;" in page
    names = page.replace("http://www.w3.org/2000/svg", "")  # SVG's namespace: a name, not fetched
    for outside in ("src=", "href=", "@import", "url(", "http://", "https://", "<link"):
        assert outside not in names, outside
    # The data cannot end its script element early, whatever a znode held.
    assert page.count("</script>") == 2
