"""`make demo`: the product working on the local stack, end to end.

Starts `zkcdc capture` and `zkcdc stream alerts` (Spark) on topics of this run's own, creates a
topic, stops a follower broker (SIGTERM) and shows the alerts that causes as they arrive on the
alerts topic and the live state from the state topic; starts the broker again, waits for the
alerts to resolve, then stops both jobs and removes the run's topics. Expects `zkcdc stack up`
to have run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from zkcdc.ground import child_processes, waiting
from zkcdc.ground.kafka_connection import KafkaConnection, close_consumer
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack, StackSettings


class Job:
    """A zkcdc command as a child process, its output in a log file."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name, self.log = name, log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", *args],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    def check(self) -> None:
        if self.process.poll() is not None:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
            raise SystemExit(f"demo: {self.name} exited {self.process.returncode}:\n{tail}")

    def stop(self) -> int:
        return child_processes.stop(self.process, 90)


class Alerts:
    """The run's alerts topic, read from its start; prints each alert as it comes."""

    def __init__(self, kafka: KafkaConnection, topic: str) -> None:
        self.topic = topic
        self.seen: list[dict[str, Any]] = []
        # which alerts to print (the rest are counted)
        self.shown: Callable[[dict[str, Any]], bool] = lambda alert: True
        self._consumer = kafka.consumer(f"{topic}-demo")
        self._assigned = False

    def poll(self) -> None:
        if not self._assigned:
            topics = self._consumer.list_topics(self.topic, timeout=10).topics
            if self.topic not in topics or not topics[self.topic].partitions:
                return
            self._consumer.assign(
                [
                    TopicPartition(self.topic, p, OFFSET_BEGINNING)
                    for p in topics[self.topic].partitions
                ]
            )
            self._assigned = True
        for message in self._consumer.consume(100, 0.5):
            value = message.value()
            if message.error() is None and value:
                alert = json.loads(value)
                self.seen.append(alert)
                if not self.shown(alert):
                    continue
                print(
                    f"  ALERT {alert['status']:<8} {alert['rule']:<22} {alert['entity']:<24} "
                    f"{alert['summary']}",
                    flush=True,
                )

    def has(self, rule: str, status: str, entity: str | None = None) -> bool:
        return any(
            a["rule"] == rule and a["status"] == status and entity in (None, a["entity"])
            for a in self.seen
        )

    def close(self) -> None:
        close_consumer(self._consumer)  # bounded: the demo ends even if its coordinator hangs


def wait(what: str, done: Callable[[], bool], jobs: list[Job], tick: Callable[[], None],
         timeout_s: float = 180) -> None:  # fmt: skip
    def look() -> bool:
        for job in jobs:
            job.check()
        if done():
            return True
        tick()  # reads what came: the wait between looks is the tick's own
        return False

    try:
        waiting.wait_until(look, timeout_s, what=what, interval_s=0)
    except waiting.WaitFailed as exc:
        raise SystemExit(f"demo: {exc}") from exc
    print(f"demo: {what}", flush=True)


def main() -> None:
    stack = LocalStack.open(StackSettings().state_dir)
    info = stack.info()
    bootstrap = info.bootstrap_servers
    work = Path(tempfile.mkdtemp(prefix="zkcdc-demo-"))
    run = f"zkcdc.demo-{int(time.time())}"
    changes, alerts_topic, state_topic = f"{run}.changes", f"{run}.alerts", f"{run}.state"
    kafka = stack.kafka()
    admin = kafka.admin()
    # On a secured stack (`stack up --secure`) every command gets the connection files it
    # printed; the passwords stay in them.
    to_kafka = ["--bootstrap-servers", bootstrap]
    to_zookeeper: list[str] = []
    if info.kafka_config_file is not None and info.zookeeper_config_file is not None:
        to_kafka = ["--kafka-config-file", str(info.kafka_config_file)]
        to_zookeeper = ["--zookeeper-config-file", str(info.zookeeper_config_file)]
        print(f"demo: secured stack ({kafka.describe()})", flush=True)
    print(f"demo: topics {run}.*, logs and event log in {work}", flush=True)

    capture = Job("capture", ["capture", "--zookeeper", info.zookeeper_connect, *to_zookeeper,
                              *to_kafka, "--topic", changes,
                              "--cluster", "local", "--event-log", str(work / "events"),
                              "--state-dir", str(work / "capture-state")],
                  work / "capture.log")  # fmt: skip
    job = Job("alert job", ["stream", "alerts", *to_kafka,
                            "--topic", changes, "--alerts-topic", alerts_topic,
                            "--state-topic", state_topic, "--checkpoint", str(work / "checkpoint")],
              work / "alerts.log")  # fmt: skip
    jobs = [capture, job]
    alerts = Alerts(kafka, alerts_topic)
    try:
        from zkcdc.streaming.errors import StreamingError
        from zkcdc.streaming.state.state_topic import read_state

        def state() -> dict[str, dict[str, Any]]:
            try:
                return read_state(kafka, state_topic, timeout_s=10)
            except StreamingError:
                return {}

        def pause() -> None:
            time.sleep(1)

        wait("capture and the alert job hold the cluster's state (Spark started)",
             lambda: "local/controller" in state(), jobs, pause)  # fmt: skip
        topic = f"demo-orders-{int(time.time())}"
        # Every partition on the stopped broker goes under-replicated: print the demo topic's
        # and the brokers' alerts, count the others.
        alerts.shown = lambda a: a["entity"].startswith((f"{topic}/", "broker/", "controller"))
        create_topics(kafka.admin, [NewTopic(topic, 1, 3)], 60)  # a client of its own each try

        def partition() -> dict[str, Any]:
            return state().get(f"local/partition/{topic}/0", {})

        wait(f"topic {topic} created, its partition fully in sync",
             lambda: len(partition().get("isr", [])) == 3, jobs, pause)  # fmt: skip
        current = state()  # one read for both: the leader and the controller as of now
        leader = current[f"local/partition/{topic}/0"]["leader"]
        controller = current["local/controller"]["broker_id"]
        follower = next(b for b in (1, 2, 3) if b not in (leader, controller))
        print(f"demo: stopping broker {follower} (a follower of {topic}) with SIGTERM", flush=True)
        stack.stop_broker(follower, signal.SIGTERM)
        wait("under_replicated and broker_down FIRING",
             lambda: alerts.has("under_replicated", "FIRING")
             and alerts.has("broker_down", "FIRING", f"broker/{follower}"),
             jobs, alerts.poll)  # fmt: skip
        print("demo: the live state now (zkcdc state show):", flush=True)
        subprocess.run([sys.executable, "-m", "zkcdc", "state", "show", *to_kafka,
                        "--state-topic", state_topic, "--cluster", "local",
                        "--limit", "10"],
                       check=False)  # fmt: skip
        print(f"demo: starting broker {follower} again", flush=True)
        stack.start_broker(follower)
        wait("the alerts RESOLVED",
             lambda: alerts.has("under_replicated", "RESOLVED")
             and alerts.has("broker_down", "RESOLVED", f"broker/{follower}"),
             jobs, alerts.poll)  # fmt: skip
    finally:
        codes = {j.name: j.stop() for j in reversed(jobs)}
        alerts.close()
        admin.delete_topics([changes, f"{changes}.deadletter", alerts_topic, state_topic])
    shown = sum(1 for a in alerts.seen if alerts.shown(a))
    print(f"demo: stopped ({', '.join(f'{n} exit {c}' for n, c in codes.items())}); "
          f"{len(alerts.seen)} alerts ({len(alerts.seen) - shown} of other topics' partitions "
          f"not printed); event log: zkcdc events cat {work / 'events'}")  # fmt: skip
    sys.exit(max(codes.values()))


if __name__ == "__main__":
    main()
