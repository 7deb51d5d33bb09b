"""`zkcdc stream alerts` on the real stack: capture watches Kafka's own tree, the Spark job turns
its records into alerts on a Kafka topic, read back here as JSON."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from alerts_harness import ChangesProducer, DeadLetters, job_read_to, state_store_writes
from conftest import wait_until
from kafka_tree import controller_id, partition_state, registered_brokers
from simulate_harness import build_cluster, simulate

from zkcdc.ground.change_types import EventType
from zkcdc.ground.child_processes import stop as stop_process
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.spark_standalone import SparkStandalone
from zkcdc.streaming.job.compiler_priority import COMPILER_NICENESS

pytestmark = pytest.mark.integration
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.mark.stops_brokers
def test_a_stopped_follower_fires_under_replicated_and_its_return_resolves_it(
    cluster, kafka_zk, new_topic, start_capture, changes_topic, start_alert_job, tmp_path, request
):
    """One live job through a stopped follower (under_replicated FIRING, then RESOLVED), a
    stopped controller (controller_failover), then every broker down for longer than its Kafka
    client waits (the job stays up and alerts on the outage once Kafka is back). A live
    history job beside it rides the same outage out and keeps what came after it."""
    topic = new_topic(partitions=2, replication_factor=3)
    wait_until(lambda: all(len((partition_state(kafka_zk, topic, p) or {}).get("isr", [])) == 3
                           for p in (0, 1)), what="full ISRs")  # fmt: skip
    daemon = start_capture(cluster.zookeeper_hosts + cluster.chroot, "--cluster", "real",
                           publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    # Kafka's clients in the job wait 5 s for a broker, not their defaults' minutes (below).
    job, alerts = start_alert_job(changes_topic, "--rule", "under_replicated_for_ms=1000",
                                  *KAFKA_WAITS, "--kafka-config", "message.timeout.ms=5000")  # fmt: skip
    with ChangesProducer(cluster.bootstrap_servers) as producer:  # not a change record
        producer.send(changes_topic.topic, b"\xc3\x01" + b"\x11" * 8 + b"garbage")
    dead = DeadLetters(cluster.bootstrap_servers, f"{changes_topic.topic}.deadletter")
    # The job's first micro-batches include its start: bounded as other first waits are.
    letter = dead.wait_for(lambda d: "fingerprint" in d["reason"], "the dead letter", 300, job)
    assert base64.b64decode(letter["value_base64"]).endswith(b"garbage")
    # Its checkpoint is written without a forked chmod or readlink a file (driver_jar.py).
    assert "zkcdc.hadoop.NioLocalFileSystem$Raw" in job.log_file.read_text(), job.tail()

    # Live, its JIT compilers yield the CPU to its micro-batches (compiler_priority.py).
    def compilers_niced() -> bool | None:
        niceness = job.compiler_niceness()
        return (niceness and set(niceness.values()) == {COMPILER_NICENESS}) or None

    job.wait_until(compilers_niced, f"the driver's JIT compilers at {COMPILER_NICENESS}", 30, 0.2)

    controller = controller_id(kafka_zk)
    follower = next(b for b in cluster.broker_ids if b != controller)
    cluster.stop_broker(follower, signal.SIGTERM)
    try:
        firing = {
            p: alerts.wait_for(
                lambda a, p=p: a["rule"] == "under_replicated" and a["entity"] == f"{topic}/{p}"
                and a["status"] == "FIRING", f"under_replicated FIRING for {topic}/{p}", 120, job,
            )
            for p in (0, 1)
        }  # fmt: skip

        def state_shows_the_incident() -> bool:  # the state topic catches up with the alerts
            shown = show_state(cluster.bootstrap_servers, job.option("--state-topic"), "real")
            brokers = shown[shown.index("Brokers") : shown.index("Controller")]
            return ("Under-replicated partitions" in shown and f"{topic}/0" in shown
                    and f"{topic}/1" in shown
                    and re.search(rf"^\W*{follower}\W+NO\b", brokers, re.M) is not None)  # fmt: skip

        wait_until(state_shows_the_incident, 120, 1.0, what="the incident in `state show`")
    finally:
        cluster.start_broker(follower)
    wait_until(lambda: follower in registered_brokers(kafka_zk), what="the follower back")
    for p, fired in firing.items():
        assert fired["severity"] == "warning" and fired["cluster"] == "real"
        assert str(follower) not in fired["details"]["isr"].split(",")
        resolved = alerts.wait_for(
            lambda a, fired=fired: a["alert_id"] == fired["alert_id"] and a["status"] == "RESOLVED",
            f"under_replicated RESOLVED for {topic}/{p}", 120, job,
        )  # fmt: skip
        assert resolved["ended_ms"] >= fired["started_ms"]
        assert resolved["started_ms"] == fired["started_ms"]

    cluster.stop_broker(controller, signal.SIGTERM)
    try:
        failover = alerts.wait_for(
            lambda a: a["rule"] == "controller_failover" and a["status"] == "FIRING",
            "controller_failover", 120, job,
        )  # fmt: skip
        assert failover["details"]["broker_before"] == str(controller)
    finally:
        cluster.start_broker(controller)
        wait_until(lambda: controller in registered_brokers(kafka_zk), what="controller back")

    # A live history job, started here rather than with the alert job: each of its micro-batches
    # (a MERGE among them) is CPU the incidents above would share.
    history = HistoryJob(cluster.bootstrap_servers, changes_topic.topic, alerts.topic, tmp_path)
    request.addfinalizer(history.kill)
    wait_until(lambda: history.commits() > 1 or history.ended(), 300, 0.5,
               what="the history job's first micro-batch")  # fmt: skip
    assert not history.ended(), history.said()
    # Every broker down for longer than the jobs' Kafka clients wait: each job rides the outage
    # out, its queries started again from their checkpoints until Kafka answers, as a daemon
    # must; then the alert job alerts on what happened meanwhile, and the lake keeps it.
    outage_ms = int(time.time() * 1000)
    for broker in cluster.broker_ids:
        cluster.stop_broker(broker, signal.SIGKILL)
    try:
        job.wait_until(lambda: "Kafka out of reach: the streaming query starts again" in
                       job.log_file.read_text(errors="replace") or None,
                       "the job to wait out Kafka's outage", 180, 0.5)  # fmt: skip
        wait_until(lambda: HistoryJob.RIDES_OUT in history.said() or history.ended(), 180, 0.5,
                   what="the history job to wait out Kafka's outage")  # fmt: skip
        assert not history.ended(), history.said()
    finally:
        for broker in cluster.broker_ids:
            cluster.start_broker(broker)
    wait_until(lambda: registered_brokers(kafka_zk) == set(cluster.broker_ids),
               what="every broker back")  # fmt: skip
    alerts.wait_for(lambda a: a["status"] == "FIRING" and a["started_ms"] >= outage_ms,
                    "an alert of the outage", 180, job)  # fmt: skip
    assert job.process.poll() is None and "zkcdc: error" not in job.log_file.read_text(), job.tail()
    # Each restart said in one warning, not beside Spark's ERROR with its Java stack; and no
    # WARN for each micro-batch longer than the 100 ms trigger (the job logs their times).
    logged = job.log_file.read_text(errors="replace")
    assert "terminated with error" not in logged and "falling behind" not in logged, job.tail()
    job.stop_quietly()  # one group, idle between micro-batches
    firing_ids = [a["alert_id"] for a in alerts.alerts if a["status"] == "FIRING"]
    assert len(firing_ids) == len(set(firing_ids)), "an alert FIRING twice"
    # The history job kept the changes made once Kafka was back, and stops as asked.
    wait_until(lambda: history.newest_ts_ms() >= outage_ms or history.ended(), 180, 1.0,
               what="the lake to hold changes of after the outage")  # fmt: skip
    assert history.stop() == 0, history.said()
    said = history.said()
    assert "Traceback" not in said and "zkcdc: error" not in said, said[-3000:]
    assert "terminated with error" not in said, said[-3000:]
    # Nor the Kafka source's offset tries or Delta's MERGE tries, each with a Java stack.
    assert "Error in attempt" not in said and "Fatal error in MERGE" not in said, said[-3000:]


KAFKA_WAITS = ("--kafka-config", "java.default.api.timeout.ms=5000",
               "--kafka-config", "java.request.timeout.ms=3000")  # fmt: skip


class HistoryJob:
    """`zkcdc stream history` into a lake of the test's own, its Kafka clients waiting 5 s for
    a broker (as the alert job's in the test above)."""

    RIDES_OUT = "Kafka out of reach: the history job's queries start again"

    def __init__(self, bootstrap: str, topic: str, alerts_topic: str, work: Path) -> None:
        self.lake, self.log = work / "lake", work / "history.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "zkcdc", "stream", "history", "--lake", str(self.lake),
                 "--bootstrap-servers", bootstrap, "--topic", topic, "--alerts-topic",
                 alerts_topic, "--checkpoint", str(work / "history-checkpoint"), *KAFKA_WAITS],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def ended(self) -> bool:
        return self.process.poll() is not None

    def commits(self) -> int:
        return len(list((self.lake / "changes" / "_delta_log").glob("*.json")))

    def newest_ts_ms(self) -> int:
        """The newest change time in `changes`, from the statistics Delta keeps of each file."""
        newest = -1
        for commit in (self.lake / "changes" / "_delta_log").glob("*.json"):
            for line in commit.read_text().splitlines():
                stats = json.loads(line).get("add", {}).get("stats")
                if stats:
                    newest = max(newest, json.loads(stats).get("maxValues", {}).get("ts_ms", -1))
        return newest

    def stop(self) -> int:
        return stop_process(self.process, 60)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def captured_simulation(
    cluster: Any, zk_chroot: Any, start_capture: Any, changes_topic: Any, name: str
) -> tuple[str, Any]:
    """A simulated cluster on the test's chroot, captured as cluster `name` onto the changes
    topic from its snapshot on: (its connect string, the capture daemon)."""
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    build_cluster(connect)
    daemon = start_capture(connect, "--cluster", name, publish_to=changes_topic)
    daemon.wait_logged("in sync")
    return connect, daemon


def show_state(bootstrap: str, topic: str, name: str) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "zkcdc", "state", "show", "--bootstrap-servers", bootstrap,
         "--state-topic", topic, "--cluster", name],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_alerts_reach_a_real_alertmanager_through_its_api(
    cluster, zk_chroot, start_capture, changes_topic, alertmanager, tmp_path
):
    connect, _ = captured_simulation(cluster, zk_chroot, start_capture, changes_topic, "am")
    run = simulate("run", "broker-failure", "--zookeeper", connect, "--broker", "3", "--hold", "4")
    assert run.returncode == 0, run.stdout + run.stderr
    changes_topic.wait_for(lambda r: r["path"] == "/brokers/ids/3" and r["op"] == "DELETE", "")

    job = subprocess.run(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--bootstrap-servers",
         cluster.bootstrap_servers, "--topic", changes_topic.topic, "--no-publish",
         "--alertmanager", alertmanager.url, "--available-now",
         "--checkpoint", str(tmp_path / "checkpoint"), "--rule", "broker_down_for_ms=1000"],
        capture_output=True, text=True, timeout=600,
        # Every JVM says it picked these up, on its stderr: a line of the driver's own, which
        # a quiet start would otherwise not give.
        env={**os.environ, "JAVA_TOOL_OPTIONS": "-Dzkcdc.test=said"},
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-3000:]
    # Its stderr is JSON log lines throughout, Spark's own among them (jvm_log_lines.py).
    logged = [json.loads(line) for line in job.stderr.splitlines()]
    assert any(
        line["logger"] == "zkcdc.spark" and "Picked up JAVA_TOOL_OPTIONS" in line["event"]
        for line in logged
    ), job.stderr[-3000:]
    # Each micro-batch that read records is logged once, in order (alert_runner.progress_since).
    batches = [line for line in logged if line["event"] == "micro-batch"]
    assert batches and all(b["records"] > 0 for b in batches), job.stderr[-3000:]
    ids = [b["batch"] for b in batches]
    assert ids == sorted(set(ids)), ids
    with urllib.request.urlopen(alertmanager.url + "/api/v2/alerts?active=true", timeout=10) as r:
        received = json.loads(r.read())
    mine = [a for a in received if a["labels"].get("cluster") == "am"]
    # Broker 3 failed; the others went down later, when the run ended and closed their sessions.
    down = [a for a in mine if a["labels"]["alertname"] == "broker_down"
            and a["labels"]["entity"] == "broker/3"]  # fmt: skip
    assert len(down) == 1, mine
    assert down[0]["labels"]["severity"] == "critical"
    assert down[0]["annotations"]["summary"] == "broker 3 is not registered"
    assert down[0]["labels"]["alert_id"].startswith("am:broker_down:broker/3:")


def test_the_alert_job_runs_on_a_spark_standalone_cluster(
    cluster, zk_chroot, start_capture, changes_topic, tmp_path
):
    connect, daemon = captured_simulation(
        cluster, zk_chroot, start_capture, changes_topic, "standalone"
    )
    # --hold: the new controller's znode is an ephemeral of the run's sessions; closed at once,
    # it can be gone before a loaded capture reads it (CI: the failover recorded as two deletes).
    run = simulate("run", "controller-failover", "--zookeeper", connect, "--hold", "2")
    assert run.returncode == 0, run.stderr
    changes_topic.wait_for(lambda r: r["path"] == "/controller_epoch" and r["op"] == "UPDATE", "")
    # The failover's own election, after the run's first one: watch mode may record the epoch
    # before it, and a capture stopped in between would leave the failover without it.
    first = changes_topic.wait_event(EventType.CONTROLLER_ELECTED)
    changes_topic.wait_event(EventType.CONTROLLER_ELECTED, after_seq=first["_seq"])
    assert daemon.stop() == 0  # both runs below read the same records

    port = free_port_block(2)  # in this worker's port range, as the stacks' ports are
    spark = SparkStandalone(tmp_path / "spark", port, port + 1)
    temp = Path(tempfile.gettempdir())
    zips_before = set(temp.glob("zkcdc-py-*")) | set(temp.glob("zkcdc-submit-*"))
    try:
        alerts_file = tmp_path / "alerts.jsonl"
        job = subprocess.run(
            [sys.executable, "-m", "zkcdc", "stream", "alerts", "--master", spark.master_url,
             "--bootstrap-servers", cluster.bootstrap_servers, "--topic", changes_topic.topic,
             "--no-publish", "--alerts-out", str(alerts_file), "--available-now",
             "--checkpoint", str(tmp_path / "checkpoint"), "--shards", "0"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert job.returncode == 0, job.stderr[-3000:]
        # A job that ended well once had written no alerts file: its log says why.
        assert alerts_file.exists(), job.stderr[-5000:]
        # The executors ran on the worker: it launched at least one for this application.
        assert list((tmp_path / "spark" / "worker").glob("app-*")), "no executor on the worker"

        # The same job through spark-submit with deploy/'s settings, its stateful stage spread
        # over two tasks (--shards 2): the same alerts, line for line.
        submitted_file = tmp_path / "submitted.jsonl"
        submitted = subprocess.run(
            [str(DEPLOY / "spark" / "submit.sh"), spark.master_url, "stream", "alerts",
             "--bootstrap-servers", cluster.bootstrap_servers, "--topic", changes_topic.topic,
             "--no-publish", "--alerts-out", str(submitted_file), "--available-now",
             "--checkpoint", str(tmp_path / "submitted-checkpoint"), "--shards", "2"],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
        assert len(list((tmp_path / "spark" / "worker").glob("app-*"))) == 2
        # Each of the two tasks held shards of the cluster: both state stores wrote changes.
        written = state_store_writes(tmp_path / "submitted-checkpoint")
        assert sorted(written) == ["0", "1"] and all(written.values()), written
        # zkcdc's code zip went to a private folder, removed when each job ended.
        zips_after = set(temp.glob("zkcdc-py-*")) | set(temp.glob("zkcdc-submit-*"))
        assert zips_after <= zips_before, zips_after - zips_before
    finally:
        spark.stop()
    alerts = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    assert {(a["rule"], a["status"]) for a in alerts if a["cluster"] == "standalone"} >= {
        ("controller_failover", "FIRING")
    }
    assert sorted(submitted_file.read_text().splitlines()) == sorted(
        alerts_file.read_text().splitlines()
    )


def test_a_killed_job_restarts_from_its_checkpoint_without_losing_or_repeating_alerts(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job, tmp_path
):
    connect, daemon = captured_simulation(
        cluster, zk_chroot, start_capture, changes_topic, "restart"
    )
    rules = ["--rule", "broker_down_for_ms=1000", "--rule", "under_replicated_for_ms=1000"]
    checkpoint = str(tmp_path / "checkpoint")
    # The killed job keeps its state by entity (--shards 2: a partition's buckets, a shard's
    # engine in chunks, two tasks' stores); the fresh run below keeps one engine a cluster, so
    # the comparison also proves the two layouts give the same alerts.
    sharded = ["--shards", "2"]
    first, alerts = start_alert_job(changes_topic, "--checkpoint", checkpoint, *sharded, *rules)
    with ChangesProducer(cluster.bootstrap_servers) as producer:  # not a change record
        producer.send(changes_topic.topic, b"\xc3\x01" + b"\x22" * 8 + b"garbage")
    dead = DeadLetters(cluster.bootstrap_servers, f"{changes_topic.topic}.deadletter")

    failure = simulate("run", "broker-failure", "--zookeeper", connect, "--broker", "3",
                       "--hold", "3")  # fmt: skip
    assert failure.returncode == 0, failure.stderr
    alerts.wait_for(lambda a: a["rule"] == "broker_down", "broker_down", 180, first)
    first.stop(signal.SIGKILL)

    # While the job is down: a controller failover, and brokers going down at the run's end.
    failover = simulate("run", "controller-failover", "--zookeeper", connect, "--hold", "2")
    assert failover.returncode == 0, failover.stderr
    second, _ = start_alert_job(changes_topic, "--alerts-topic", alerts.topic,
                                "--checkpoint", checkpoint, *sharded, *rules)  # fmt: skip
    alerts.wait_for(
        lambda a: a["rule"] == "controller_failover" and a["status"] == "FIRING",
        "controller_failover after the restart", 180, second,
    )  # fmt: skip
    assert daemon.stop() == 0
    ends = changes_topic.ends()  # the restarted job drains the last records
    wait_until(lambda: job_read_to(Path(checkpoint), changes_topic.topic, ends), 300,
               what="the restarted job to read the topic to its end")  # fmt: skip
    second.stop_quietly()  # two shards, idle: it has read the topic to its end
    alerts.read_to_end()
    written = state_store_writes(Path(checkpoint))  # the killed layout's two tasks' stores
    assert sorted(written) == ["0", "1"] and all(written.values()), written
    # The dead letter went through the sharded stage once (not once per shard), kill or not
    # (at least once: a re-run micro-batch may send it again).
    dead.read_to_end()
    sharded_letters = len(dead.letters)
    assert sharded_letters >= 1 and all(
        base64.b64decode(d["value_base64"]).endswith(b"garbage") for d in dead.letters
    ), dead.letters

    fresh_file = tmp_path / "fresh.jsonl"
    fresh = subprocess.run(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--bootstrap-servers",
         cluster.bootstrap_servers, "--topic", changes_topic.topic, "--no-publish",
         "--alerts-out", str(fresh_file), "--available-now",
         "--checkpoint", str(tmp_path / "fresh-checkpoint"), "--shards", "0", *rules],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    # A bounded run whose alerts Spark writes to files delivers the dead letters too.
    dead.read_to_end()
    assert len(dead.letters) == sharded_letters + 1, dead.letters
    expected = [json.loads(line) for line in fresh_file.read_text().splitlines()]
    delivered = [(a["alert_id"], a["status"]) for a in alerts.alerts]
    assert len(delivered) == len(set(delivered)), "an alert delivered twice"
    assert sorted(delivered) == sorted((a["alert_id"], a["status"]) for a in expected)
