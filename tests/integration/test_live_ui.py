"""`zkcdc ui` in a real headless browser (Debian's chromium) on the real stack: a follower
broker stopped shows as down, with its partitions under-replicated, within 3 s of the alert
reaching the alerts topic, and back in sync after its restart. Screenshots of both moments are
kept with the test output (and shown in the README)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from kafka_tree import controller_id, partition_state, registered_brokers

from zkcdc.ground.child_processes import stop
from zkcdc.stack.debian_packages import ensure_binary

pytestmark = pytest.mark.integration
SHOTS = Path(os.environ.get("ZKCDC_TEST_ARTIFACTS", "test-artifacts")) / "ui"
WITHIN_MS = 3000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _budget_s(arrived_ms: int) -> float:
    """What is left of the 3 s after the alert reached the topic."""
    return max(0.0, (arrived_ms + WITHIN_MS) / 1000 - time.time())


def test_the_page_shows_a_stopped_follower_down_and_its_partitions_under_replicated_within_3_s(
    cluster: Any, kafka_zk: Any, new_topic: Any, start_capture: Any, changes_topic: Any,
    start_alert_job: Any, tmp_path: Path,
) -> None:  # fmt: skip
    from playwright.sync_api import sync_playwright

    topic = new_topic(partitions=2, replication_factor=3)
    wait_until(lambda: all(len((partition_state(kafka_zk, topic, p) or {}).get("isr", [])) == 3
                           for p in (0, 1)), what="full ISRs")  # fmt: skip
    daemon = start_capture(cluster.zookeeper_hosts + cluster.chroot, "--cluster", "ui",
                           "--metrics-port", str(metrics := _free_port()),
                           publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    job, alerts = start_alert_job(changes_topic, "--rule", "broker_down_for_ms=1000",
                                  "--rule", "under_replicated_for_ms=1000")  # fmt: skip
    port = _free_port()
    log = (tmp_path / "ui.log").open("wb")
    ui = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "ui", "--bootstrap-servers", cluster.bootstrap_servers,
         "--state-topic", job.option("--state-topic"), "--alerts-topic", alerts.topic,
         "--topic", changes_topic.topic, "--port", str(port),
         "--capture-metrics", f"http://127.0.0.1:{metrics}/metrics"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    SHOTS.mkdir(parents=True, exist_ok=True)
    chromium = ensure_binary("chromium", "chromium")
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            wait_until(lambda: _answers(port), 30, what="the ui serving")
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#brokers .broker[data-status='up'] >> nth=2", timeout=180_000)
            page.fill("#filter-topic", topic)  # the stack holds other tests' topics too
            page.wait_for_selector("#partition-counts[data-in_sync='2']", timeout=60_000)

            follower = next(b for b in cluster.broker_ids if b != controller_id(kafka_zk))
            cluster.stop_broker(follower, signal.SIGTERM)
            try:
                down = alerts.wait_for(
                    lambda a: a["rule"] == "broker_down" and a["status"] == "FIRING"
                    and a["entity"] == f"broker/{follower}", "broker_down", 120, job)  # fmt: skip
                arrived = alerts.arrived_ms[(down["alert_id"], "FIRING")]
                page.wait_for_selector(
                    f"#brokers .broker[data-broker='{follower}'][data-status='down']",
                    timeout=1000 * _budget_s(arrived) + 1,
                )
                urp = alerts.wait_for(
                    lambda a: a["rule"] == "under_replicated" and a["status"] == "FIRING",
                    "under_replicated", 120, job)  # fmt: skip
                page.wait_for_selector(
                    "#problem-partitions tr[data-state='under_replicated'] >> nth=1",
                    timeout=1000 * _budget_s(alerts.arrived_ms[(urp["alert_id"], "FIRING")]) + 1,
                )
                page.screenshot(path=str(SHOTS / "broker-down.png"), full_page=True)
            finally:
                cluster.start_broker(follower)
            wait_until(lambda: follower in registered_brokers(kafka_zk), what="the follower back")
            resolved = alerts.wait_for(
                lambda a: a["alert_id"] == urp["alert_id"] and a["status"] == "RESOLVED",
                "under_replicated RESOLVED", 120, job)  # fmt: skip
            budget = _budget_s(alerts.arrived_ms[(resolved["alert_id"], "RESOLVED")])
            page.wait_for_selector(f"#brokers .broker[data-broker='{follower}'][data-status='up']",
                                   timeout=1000 * budget + 1)  # fmt: skip
            alerts.wait_for(lambda a: a["status"] == "RESOLVED" and a["alert_id"] != urp["alert_id"]
                            and a["rule"] == "under_replicated", "both partitions", 120, job)  # fmt: skip
            page.wait_for_selector("#partition-counts[data-in_sync='2']", timeout=WITHIN_MS)
            page.screenshot(path=str(SHOTS / "back-in-sync.png"), full_page=True)
            browser.close()
    finally:
        stop(ui, 10)
        log.close()
        print(f"--- ui log ---\n{(tmp_path / 'ui.log').read_text(errors='replace')[-3000:]}")
        shutil.copytree(SHOTS, tmp_path / "screenshots", dirs_exist_ok=True)
    assert ui.returncode in (0, -signal.SIGTERM)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
