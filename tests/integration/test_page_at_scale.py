"""The live page as a person meets it during a broker failure at 1,000 partitions, in a real
chromium at 1500 px: the alert line names the broker that is down, the timeline is a lane a
rule, the partitions not in sync are counted by topic and kept in a scrolling box, the page
stays under two screen heights, and nothing runs that its Content-Security-Policy refused.

The page's server is `zkcdc ui`'s own web app over a LiveModel fed as its Kafka feeds feed it
(state records made by the rules' own code, alert records): no stack is needed for this."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from conftest import wait_until
from debian_packages import ensure_binary
from playwright.sync_api import sync_playwright
from ui_harness import answers, free_port, wait_for_page

from zkcdc.streaming.rules.alert_records import alert_id
from zkcdc.streaming.rules.cluster_state import Broker, ClusterState, Partition
from zkcdc.streaming.rules.state_records import upserts
from zkcdc.view.live_model import LiveModel
from zkcdc.view.web_app import app

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1500, 900
DOWN = 2


def replicas_of(topic: int, partition: int) -> tuple[int, ...]:
    return tuple(1 + (partition + topic + i) % 6 for i in range(3))


# The partitions that lose broker 2: under-replicated, in all and by topic.
LOST = {t: sum(DOWN in replicas_of(t, p) for p in range(100)) for t in range(10)}


def failed_cluster(now_ms: int) -> LiveModel:
    """6 brokers, 10 topics of 100 partitions (replication 3), broker 2 down: its ~500
    partitions under-replicated, each with its alert, and broker_down."""
    state = ClusterState("prod")
    for b in range(1, 7):
        state.brokers[b] = Broker(b != DOWN, (f"PLAINTEXT://b{b}:9092",), 100 + b)
    alerts: list[dict[str, Any]] = []
    for t in range(10):
        topic = f"orders-{t}"
        state.topics[topic] = set(range(100))
        for p in range(100):
            replicas = replicas_of(t, p)
            isr = tuple(r for r in replicas if r != DOWN)
            leader = isr[0]
            state.partitions[(topic, p)] = Partition(replicas, (), (), leader, isr, 5, 1)
            if len(isr) < 3:
                started = now_ms - 30_000 + p * 10
                alerts.append(_alert("under_replicated", "warning", f"{topic}/{p}", started))
    alerts.append(_alert("broker_down", "critical", f"broker/{DOWN}", now_ms - 40_000))
    model = LiveModel()
    entities = [("broker", b) for b in state.brokers] + [("partition", k) for k in state.partitions]
    for key, value in upserts(state, entities, now_ms):
        model.put_state(key, value)
    for alert in alerts:
        model.put_alert(alert)
    for feed in ("state", "alerts", "changes"):
        model.mark_loaded(feed)
    return model


def _alert(rule: str, severity: str, entity: str, started_ms: int) -> dict[str, Any]:
    return {"alert_id": alert_id("prod", rule, entity, started_ms), "rule": rule,
            "severity": severity, "status": "FIRING", "cluster": "prod", "entity": entity,
            "started_ms": started_ms, "ended_ms": None, "summary": f"{rule} {entity}",
            "details": {}}  # fmt: skip


@pytest.fixture
def page_server() -> Iterator[int]:
    port = free_port()
    model = failed_cluster(int(time.time() * 1000))
    server = uvicorn.Server(uvicorn.Config(app(model), host="127.0.0.1", port=port,
                                           log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: answers(port), 30, what="the page's server")
    yield port
    server.should_exit = True
    thread.join(10)


def test_a_broker_failure_at_1000_partitions_reads_well_in_chromium(page_server: int) -> None:
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=str(ensure_binary("chromium", "chromium")), args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        refused: list[str] = []
        page.on("console", lambda m: refused.append(m.text)
                if "Content Security Policy" in m.text else None)  # fmt: skip
        page.goto(f"http://127.0.0.1:{page_server}/")
        down = page.locator("#active-alerts li.alert-group[data-rule='broker_down'] summary")
        down.wait_for(timeout=60_000)
        assert f"broker {DOWN}" in down.inner_text() and "broker 1" not in down.inner_text()
        urp = sum(LOST.values())
        page.wait_for_selector(f"#partition-counts[data-under_replicated='{urp}']", timeout=30_000)

        # The page takes a large snapshot in bites: the lanes' counts once all of it is in.
        lanes = [f"under_replicated · {urp} firing", "broker_down · 1 firing"]
        wait_for_page(
            page, """(want) => { const got = [...document.querySelectorAll('#alert-timeline text.lane')]
                .map((t) => t.textContent).sort(); return JSON.stringify(got) ===
                JSON.stringify([...want].sort()); }""",
            lanes, timeout_s=30, what="one lane per firing rule",
        )  # fmt: skip
        by_topic = page.locator("#problem-topics")
        assert by_topic.get_attribute("data-topics") == "10"
        assert f"orders-0: {LOST[0]}" in by_topic.inner_text()

        height = page.evaluate("() => document.documentElement.scrollHeight")
        assert height < 2 * HEIGHT, f"the page is {height} px tall"
        # The width is used: the top row holds three cards side by side.
        tops = page.evaluate("""() => ['brokers-card', 'alerts-card', 'balance-card']
            .map((id) => document.getElementById(id).getBoundingClientRect().top)""")
        assert max(tops) - min(tops) < 5, tops
        assert refused == [], refused
        browser.close()
