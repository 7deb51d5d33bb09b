"""`zkcdc report`'s page, opened in a real headless browser with every network request
refused, shows at a chosen moment the brokers, controller and under-replicated partitions that
the Spark alert job's state holds after the same records up to that moment."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from debian_packages import ensure_binary

from zkcdc.ground import waiting
from zkcdc.streaming.state.state_view import ClusterView
from zkcdc.view.incident import build

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOG = FIXTURES / "event_log_v1"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    chromium = ensure_binary("chromium", "chromium")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        yield launched
        launched.close()


def _records() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (file,) = sorted(LOG.iterdir())
    with file.open("rb") as stream:
        reader = fastavro.reader(stream)
        return reader.writer_schema, list(reader)


def _moment(records: list[dict[str, Any]]) -> int:
    """The first moment a broker is down and a partition under-replicated."""
    timeline = build(records)
    for step in timeline.steps:
        view = ClusterView.of("fixture", timeline.state_at(step.t))
        down = [b for b in view.brokers if not b["alive"]]
        if down and view.under_replicated and len(down) < len(view.brokers):
            return step.t
    raise AssertionError("the fixture has no moment with a broker down and a partition URP")


def _descendants(pid: int) -> list[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def test_the_report_at_a_chosen_time_shows_what_the_alert_job_kept_up_to_it(
    browser: Any, tmp_path: Path
) -> None:
    schema, records = _records()
    t = _moment(records)
    cut = tmp_path / "cut"
    cut.mkdir()
    with (cut / sorted(LOG.iterdir())[0].name).open("wb") as out:
        fastavro.writer(out, schema, [r for r in records if r["ts_ms"] <= t], codec="null")
    state_out = tmp_path / "state.jsonl"
    # Its output in a file, so a replay that hangs (its JVM once held by a stray strace)
    # fails with its log, before pytest's own timeout takes the test without one.
    replay_log = tmp_path / "replay.log"
    with replay_log.open("wb") as out:
        replay = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", "replay", str(cut), "--alerts-out",
             str(tmp_path / "alerts.jsonl"), "--state-out", str(state_out)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            code = replay.wait(480)
        except subprocess.TimeoutExpired:
            for pid in _descendants(replay.pid):  # the JVM prints its threads' stacks
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGQUIT)
            with contextlib.suppress(waiting.WaitFailed):  # the JVM's dump, or give up on it
                waiting.wait_until(
                    lambda: "Full thread dump" in replay_log.read_text(errors="replace"), 10,
                    what="the JVM's thread dump", interval_s=0.2,
                )  # fmt: skip
            replay.kill()
            replay.wait()
            code = None
    assert code is not None, f"the replay ran 480 s: {replay_log.read_text()[-20000:]}"
    assert code == 0, replay_log.read_text()[-3000:]
    latest = {}
    for line in state_out.read_text().splitlines():
        value = json.loads(line)
        kind = value["kind"]
        ident = {"broker": value.get("broker_id"), "partition": (value.get("topic"),
                 value.get("partition")), "topic": value.get("topic"),
                 "group": value.get("group")}.get(kind)  # fmt: skip
        latest[f"{kind}/{ident}"] = value
    job = ClusterView.of("fixture", {f"fixture/{k}": v for k, v in latest.items()})

    page_file = tmp_path / "incident.html"
    made = subprocess.run(
        [sys.executable, "-m", "zkcdc", "report", str(LOG), "-o", str(page_file)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert page_file.stat().st_size > 0

    page = browser.new_page()
    asked: list[str] = []

    def refuse(route: Any) -> None:
        if not route.request.url.startswith("file:"):
            asked.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", refuse)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"file://{page_file}#t={t}")
    page.wait_for_function(f"document.body.dataset.t === '{t}'")
    page.screenshot(path=str(tmp_path / "incident.png"), full_page=True)
    assert not errors and not asked, (errors, asked)

    shown_brokers = {
        int(b.get_attribute("data-broker")): b.get_attribute("data-status")
        for b in page.query_selector_all("#brokers .broker")
    }
    assert shown_brokers == {b["broker_id"]: "up" if b["alive"] else "down" for b in job.brokers}
    controller = (job.controller or {}).get("broker_id")
    assert page.get_attribute("#controller", "data-broker") == (
        "" if controller is None else str(controller)
    )
    shown_urp = {
        row.get_attribute("data-partition")
        for row in page.query_selector_all("#problem-partitions tbody tr[data-state]")
        if row.get_attribute("data-state") in ("under_replicated", "under_min_isr")
    }
    assert shown_urp == {f"{p['topic']}/{p['partition']}" for p in job.under_replicated}
    assert shown_urp, "the chosen moment has under-replicated partitions"
    page.close()
