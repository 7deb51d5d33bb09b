"""zkcdc on a secured cluster (`zkcdc stack up --secure`): SASL_SSL brokers with SCRAM-SHA-512,
ZooKeeper on TLS with SASL required and Kafka's ACLs on its znodes. The demo incident (a
follower broker stopped, started again) goes through capture -> Kafka -> the alert job ->
alerts topic + Alertmanager -> `state show`, and `replay` works both ways, every connection
authenticated and encrypted; an unauthenticated client is refused; and no password of the
run shows in any log, metric, process argument or error."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import wait_until
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.ground.child_processes import stop
from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError, NoSuchTopic
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack.cluster import LocalStack
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.settings import StackSettings
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.state.state_topic import read_state

pytestmark = pytest.mark.integration

RULES = ["--rule", "broker_down_for_ms=1000", "--rule", "under_replicated_for_ms=1000"]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    settings = StackSettings(
        state_dir=tmp_path_factory.mktemp("secure-stack"),
        zookeeper_port=free_port_block(3),
        kafka_port=free_port_block(3),
        secure=True,
    )
    stack = LocalStack(settings)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def _zkcdc(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkcdc", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


def _spawn(log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "zkcdc", *args], stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


def _read(kafka: KafkaConnection, topic: str) -> list[Any]:
    messages: list[Any] = []
    with contextlib.suppress(NoSuchTopic):
        kafka.read_to_end(topic, messages.append, None, 10.0, group=f"t-{uuid.uuid4().hex[:6]}")
    return messages


def _alerts(kafka: KafkaConnection, topic: str) -> list[dict[str, Any]]:
    return [json.loads(m.value()) for m in _read(kafka, topic)]


def _has(alerts: list[dict[str, Any]], rule: str, status: str, entity: str = "") -> bool:
    return any(a["rule"] == rule and a["status"] == status and a["entity"].startswith(entity)
               for a in alerts)  # fmt: skip


class ArgvWatch:
    """Every process's command line, sampled while the run goes on."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def sample(self) -> None:
        for process in psutil.process_iter(["cmdline"]):
            self.seen.add(" ".join(process.info["cmdline"] or ()))


def test_an_unauthenticated_client_is_refused_by_zookeeper_and_kafka(secured: LocalStack) -> None:
    hosts = secured.layout.zookeeper_hosts
    plain = KazooClient(hosts=hosts, timeout=5)
    with pytest.raises(KazooTimeoutError):  # no TLS: no session at all
        plain.start(timeout=5)
    plain.close()
    secure = secured.secure
    assert secure is not None
    anonymous = KazooClient(hosts=hosts, use_ssl=True, ca=str(secure.ca), timeout=5)
    try:  # TLS but no SASL: ZooKeeper closes the session (enforce.auth)
        anonymous.start(timeout=5)
        with pytest.raises(KazooException):
            anonymous.get_children("/")
    except KazooTimeoutError:
        pass
    finally:
        anonymous.stop()
        anonymous.close()
    kafka = secured.kafka()
    assert sorted(kafka.admin().list_topics(timeout=30).brokers) == [1, 2, 3]
    for refused in (
        KafkaConnection(bootstrap_servers=kafka.bootstrap_servers),  # plaintext
        kafka.model_copy(update={"sasl_password": "wrong"}),
        kafka.model_copy(update={"ssl_ca_location": None}),  # a server it cannot trust
    ):
        with pytest.raises(Exception, match=r"transport|SSL|Authentication|timed out"):
            refused.admin().list_topics(timeout=8)


@pytest.mark.timeout(900)  # the whole demo incident, two Spark runs, every hop over TLS
def test_the_demo_incident_goes_through_capture_alerts_alertmanager_state_and_replay_with_no_secret_shown(
    secured: LocalStack, alertmanager: Any, tmp_path: Path
) -> None:
    info = secured.info()
    secure = secured.secure
    assert secure is not None and info.kafka_config_file and info.zookeeper_config_file
    kafka = secured.kafka()
    run = uuid.uuid4().hex[:6]
    changes, alerts_topic, state_topic = (f"zkcdc.{k}.secure-{run}" for k in
                                          ("changes", "alerts", "state"))  # fmt: skip
    kafka_file, zk_file = str(info.kafka_config_file), str(info.zookeeper_config_file)
    passwords = list(secure.passwords.values())
    argv = ArgvWatch()
    logs = {name: tmp_path / f"{name}.log" for name in ("capture", "alerts")}
    capture = _spawn(logs["capture"], "capture", "--zookeeper", info.zookeeper_connect,
                     "--kafka-config-file", kafka_file, "--zookeeper-config-file", zk_file,
                     "--topic", changes, "--cluster", "sec", "--event-log",
                     str(tmp_path / "events"), "--state-dir", str(tmp_path / "state"),
                     "--metrics-port", str(free_port_block(1)), "--wait")  # fmt: skip
    job = _spawn(logs["alerts"], "stream", "alerts", "--kafka-config-file", kafka_file,
                 "--topic", changes, "--alerts-topic", alerts_topic, "--state-topic", state_topic,
                 "--alertmanager", alertmanager.url, "--alertmanager-resend-s", "2",
                 "--checkpoint", str(tmp_path / "checkpoint"), *RULES)  # fmt: skip
    outputs: list[str] = []
    try:

        def alive(then: Callable[[], Any]) -> Callable[[], Any]:
            def check() -> Any:
                argv.sample()
                for name, process in (("capture", capture), ("alerts", job)):
                    assert process.poll() is None, f"{name}:\n{logs[name].read_text()[-3000:]}"
                return then()

            return check

        def state() -> dict[str, Any]:
            try:
                return read_state(kafka, state_topic, timeout_s=10)
            except StreamingError:
                return {}  # no state topic yet

        # The job's Spark start and first micro-batch (capture's snapshot): once, under the
        # suite's load on a slow day, took 1m43s to start Spark and more than 240 s in all.
        wait_until(alive(lambda: "sec/controller" in state()), 420, 1.0,
                   what="the alert job's state of the secured cluster")  # fmt: skip
        topic = f"secure-orders-{run}"
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        create_topics(kafka.admin, [NewTopic(topic, 1, 3)], 60)
        key = f"sec/partition/{topic}/0"
        wait_until(alive(lambda: len(state().get(key, {}).get("isr", [])) == 3), 120, 1.0,
                   what="the new topic's partition in sync")  # fmt: skip
        current = state()
        leader, controller = current[key]["leader"], current["sec/controller"]["broker_id"]
        follower = next(b for b in (1, 2, 3) if b not in (leader, controller))
        secured.stop_broker(follower)
        wait_until(alive(lambda: _has(_alerts(kafka, alerts_topic), "broker_down", "FIRING",
                                      f"broker/{follower}")), 180, 1.0,
                   what="broker_down FIRING on the alerts topic")  # fmt: skip

        def in_alertmanager() -> bool:
            with urllib.request.urlopen(alertmanager.url + "/api/v2/alerts?active=true",
                                        timeout=5) as answer:  # fmt: skip
                return any(a["labels"]["alertname"] == "broker_down"
                           and a["labels"]["cluster"] == "sec" for a in json.load(answer))  # fmt: skip

        wait_until(alive(in_alertmanager), 60, 1.0, what="broker_down in Alertmanager")
        shown = _zkcdc("state", "show", "--kafka-config-file", kafka_file, "--state-topic",
                       state_topic, "--cluster", "sec")  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert "sec" in shown.stdout
        outputs += [shown.stdout, shown.stderr]
        secured.start_broker(follower)
        wait_until(alive(lambda: _has(_alerts(kafka, alerts_topic), "broker_down", "RESOLVED",
                                      f"broker/{follower}")), 180, 1.0,
                   what="broker_down RESOLVED")  # fmt: skip
        for name, process in (("capture", capture), ("alerts", job)):
            process.send_signal(signal.SIGTERM)
            assert process.wait(120) == 0, logs[name].read_text()[-3000:]
    finally:
        for process in (capture, job):
            stop(process, 0, signal.SIGKILL)

    # Kafka's SCRAM credentials were in the captured tree; they are not in what capture wrote.
    records = list(read_records(tmp_path / "events"))
    users = [r for r in records if r["path"].startswith("/config/users/")]
    assert {r["path"] for r in users} >= {"/config/users/zkcdc", "/config/users/admin"}
    zk = secured.zookeeper_access().client(secured.layout.zookeeper_hosts, 10)
    zk.start(30)
    try:
        stored = json.loads(zk.get(f"{info.chroot}/config/users/zkcdc")[0])["config"]
    finally:
        zk.stop()
        zk.close()
    credential = stored["SCRAM-SHA-512"]
    assert credential not in repr(records)
    assert all(credential.encode() not in m.value() for m in _read(kafka, changes))

    # Replay, into Kafka over SASL_SSL and through the rules.
    replayed = _zkcdc("replay", str(tmp_path / "events"), "--kafka-config-file", kafka_file,
                      "--topic", f"{changes}.replayed", "--checkpoint",
                      str(tmp_path / "replay.json"))  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert len(_read(kafka, f"{changes}.replayed")) == len(records)
    alerts_out = tmp_path / "replayed-alerts.jsonl"
    through = _zkcdc("replay", str(tmp_path / "events"), "--alerts-out", str(alerts_out), *RULES)
    assert through.returncode == 0, through.stderr
    replay_alerts = [json.loads(line) for line in alerts_out.read_text().splitlines()]
    assert _has(replay_alerts, "broker_down", "FIRING", f"broker/{follower}")
    outputs += [replayed.stdout, replayed.stderr, through.stdout, through.stderr]

    # An error of a wrong password names no password either.
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(Path(kafka_file).read_text().replace(secure.passwords["zkcdc"], "nope"))
    refused = _zkcdc("state", "show", "--kafka-config-file", str(wrong), "--state-topic",
                     state_topic, timeout=120)  # fmt: skip
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    outputs += [refused.stdout, refused.stderr]

    # No password anywhere: zkcdc's logs and outputs, the servers' logs, every argv seen.
    texts = {name: log.read_text(errors="replace") for name, log in logs.items()}
    texts |= {f"output {n}": text for n, text in enumerate(outputs)}
    texts |= {p.name: p.read_text(errors="replace") for p in secured.layout.logs_dir.glob("*")}
    texts["argv"] = "\n".join(argv.seen)
    leaks = [(name, password) for name, text in texts.items() for password in passwords
             if password in text]  # fmt: skip
    assert leaks == [], leaks
    assert len(argv.seen) > 10


def test_metrics_of_a_secured_run_hold_no_secret(secured: LocalStack, tmp_path: Path) -> None:
    info = secured.info()
    secure = secured.secure
    assert secure is not None and info.kafka_config_file and info.zookeeper_config_file
    port = free_port_block(1)
    log = tmp_path / "capture.log"
    capture = _spawn(log, "capture", "--zookeeper", info.zookeeper_connect,
                     "--kafka-config-file", str(info.kafka_config_file),
                     "--zookeeper-config-file", str(info.zookeeper_config_file),
                     "--topic", f"zkcdc.changes.metrics-{uuid.uuid4().hex[:6]}",
                     "--cluster", "secm", "--state-dir", str(tmp_path / "state"),
                     "--metrics-port", str(port))  # fmt: skip
    try:

        def metrics() -> str:
            assert capture.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
                    text = r.read().decode()
            except OSError:
                return ""
            return text if "zkcdc_capture_active 1.0" in text else ""

        body = str(wait_until(metrics, 90, 1.0, what="metrics after the snapshot"))
        assert not [p for p in secure.passwords.values() if p in body]
        # The election's znodes: changed or deleted only by capture's SASL identity.
        zk = secured.zookeeper_access().client(secured.layout.zookeeper_hosts, 10)
        zk.start(30)
        try:
            acl, _ = zk.get_acls("/zkcdc/capture/secm")
        finally:
            zk.stop()
            zk.close()
        rights = {(a.id.scheme, a.id.id): a.perms for a in acl}
        assert rights == {("sasl", "kafka"): 31, ("world", "anyone"): 1}, rights
    finally:
        capture.send_signal(signal.SIGTERM)
        capture.wait(60)
    assert not [p for p in secure.passwords.values() if p in log.read_text()]


def test_kafka_config_errors_are_one_line_without_the_secret() -> None:
    result = _zkcdc("state", "show", "--bootstrap-servers", "127.0.0.1:1", "--kafka-config",
                    "sasl.password=hunter2")  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "not on the command line" in result.stderr and "hunter2" not in result.stderr
    with pytest.raises(KafkaConnectionError):
        KafkaConnection(bootstrap_servers="127.0.0.1:1").read_to_end("t", print, None, 2.0)
