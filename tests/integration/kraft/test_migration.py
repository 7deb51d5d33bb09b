"""A ZooKeeper-to-KRaft migration staged with `zkcdc stack migrate` while capture and the alert
job run: the watch capture sees the migration's phases in ZooKeeper (`/migration`, the KRaft
controller in `/controller`), a KRaft capture beside the controller takes the stream over with
`seq` going on and nothing said twice, the finalization is seen in the metadata log, and an
incident after it raises and resolves its alerts."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from alerts_harness import AlertJob, AlertsTopic
from capture_harness import CaptureProcess, ChangesTopic
from cluster_backends import ClusterBackend
from confluent_kafka.admin import AdminClient, NewTopic

from zkcdc.ground.change_types import EventType
from zkcdc.ground.child_processes import stop
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.processes import tail

pytestmark = pytest.mark.integration

# What only a KRaft capture renders (/kraft), said once when it takes the stream over, and a
# broker's registration as KRaft holds it (its timestamp, no JMX port): nothing else changed.
_KRAFT_ONLY = {EventType.BROKER_UNFENCED, EventType.FEATURE_LEVEL_CHANGED, EventType.CONTROLLER_QUORUM_CHANGED,
               EventType.MIGRATION_STATE_CHANGED, EventType.BROKER_UPDATED}  # fmt: skip


def _migrate(state_dir: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "stack", "migrate", "--state-dir", str(state_dir), *args],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def _events(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [{**e, "_seq": r["seq"]} for r in records for e in r["events"] if e["type"] == kind]


@pytest.mark.timeout(1200)  # a migration is four rolling phases
def test_a_migration_is_captured_throughout_and_a_kraft_capture_takes_the_stream_over(
    cluster: ClusterBackend, tmp_path: Path
) -> None:
    settings = StackSettings(
        state_dir=tmp_path / "stack", zookeeper_port=free_port_block(1),
        kafka_port=free_port_block(3), controller_port=free_port_block(1), controllers=1,
    )  # fmt: skip
    stack = LocalStack(settings)
    suffix = uuid.uuid4().hex[:6]
    changes = ChangesTopic(cluster.bootstrap_servers, f"zkcdc.changes.migration-{suffix}")
    alerts = AlertsTopic(cluster.bootstrap_servers, f"zkcdc.alerts.migration-{suffix}")
    processes: list[Any] = []
    try:
        info = stack.up()
        topic = f"orders-{suffix}"
        admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
        create_topics(lambda: admin, [NewTopic(topic, 2, 3)], 60)
        # The changes and alerts topics live on the session's cluster, not the migrated one.
        kafka = ["--bootstrap-servers", cluster.bootstrap_servers, "--topic", changes.topic]
        watch = CaptureProcess(
            ["--zookeeper", info.zookeeper_connect, *kafka,
             "--state-dir", str(tmp_path / "watch-state"),
             "--event-log", str(tmp_path / "watch-log")],
            tmp_path / "watch.log",
        )  # fmt: skip
        processes.append(watch)
        job = AlertJob(
            [*kafka, "--alerts-topic", alerts.topic,
             "--state-topic", f"zkcdc.state.migration-{suffix}",
             "--checkpoint", str(tmp_path / "checkpoint"), "--warm-up-batches", "0"],
            tmp_path / "alerts.log",
        )  # fmt: skip
        processes.append(job)
        watch.wait_logged("in sync")
        changes.wait_event(
            EventType.PARTITION_STATE_CREATED, snapshot=True, topic=topic, partition=0
        )

        # Phases 1-2: controllers with migration enabled, brokers rolled: dual-write.
        _migrate(settings.state_dir, "--until", "dual-write")
        migrated = changes.wait_event(
            EventType.MIGRATION_STATE_CHANGED, migration_state_after="MIGRATION"
        )
        elected = changes.wait_event(EventType.CONTROLLER_ELECTED, broker_id=101)
        assert elected["epoch_after"] is not None  # a KRaft controller: its Raft epoch
        assert watch.stop() == 0, watch.tail()

        # The hand-over: a KRaft capture beside the controller, on another state dir, goes on
        # from the topic.
        stack = LocalStack.open(settings.state_dir)
        controller = stack.info()
        kraft = CaptureProcess(
            ["--source", "kraft", "--metadata-log-dir", str(controller.metadata_log_dirs[0]),
             "--bootstrap-controllers", controller.bootstrap_controllers, *kafka, "--take-over",
             "--state-dir", str(tmp_path / "kraft-state"),
             "--event-log", str(tmp_path / "kraft-log")],
            tmp_path / "kraft.log",
        )  # fmt: skip
        processes.append(kraft)
        kraft.wait_logged("in sync", 120)
        _wait_kraft_event(
            changes, EventType.MIGRATION_STATE_CHANGED, migration_state_after="MIGRATION"
        )

        # Phases 3-4: brokers rolled to KRaft, controllers finalized.
        _migrate(settings.state_dir)
        _wait_kraft_event(
            changes, EventType.MIGRATION_STATE_CHANGED, migration_state_after="POST_MIGRATION"
        )
        stack = LocalStack.open(settings.state_dir)

        # An incident after finalizing: a follower stopped, then started again.
        stack.stop_broker(3, signal.SIGTERM)
        try:
            down = alerts.wait_for(
                lambda a: a["rule"] == "broker_down" and a["entity"] == "broker/3"
                and a["status"] == "FIRING" and a["started_ms"] > migrated_ms(changes, migrated),
                "broker_down FIRING for broker 3", 240, job,
            )  # fmt: skip
            under = alerts.wait_for(
                lambda a: a["rule"] == "under_replicated" and a["entity"] == f"{topic}/0"
                and a["status"] == "FIRING" and a["started_ms"] >= down["started_ms"] - 60_000,
                f"under_replicated FIRING for {topic}/0", 180, job,
            )  # fmt: skip
        finally:
            stack.start_broker(3)
        for fired in (down, under):
            alerts.wait_for(
                lambda a, f=fired: a["alert_id"] == f["alert_id"] and a["status"] == "RESOLVED"
                and a["started_ms"] == f["started_ms"], f"{fired['rule']} RESOLVED", 240, job,
            )  # fmt: skip
        assert kraft.stop() == 0, kraft.tail()
        assert job.stop() == 0, job.tail()
        changes.poll()
        alerts.poll()

        records = sorted(changes.records, key=lambda r: int(r["seq"]))  # keyed: many partitions
        # One stream: seq 1..n without a gap or a repeat, the watch capture's then the KRaft one's.
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        modes = [r["source"]["mode"] for r in records]
        switch = modes.index("kraft")
        assert set(modes[:switch]) == {"watch"} and set(modes[switch:]) == {"kraft"}
        assert len({r["cluster"] for r in records}) == 1
        # Every phase: the controller claiming ZooKeeper and the metadata copied (ZooKeeper's
        # /migration), the KRaft controller elected, the brokers rolled to KRaft, finalized.
        phases = [(e["migration_state_after"], r["source"]["mode"]) for r in records
                  for e in r["events"] if e["type"] == EventType.MIGRATION_STATE_CHANGED]  # fmt: skip
        assert phases == [("PRE_MIGRATION", "watch"), ("MIGRATION", "watch"),
                          ("MIGRATION", "kraft"), ("POST_MIGRATION", "kraft")]  # fmt: skip
        kraft_part = records[switch:]
        rolled = {e["broker_id"] for e in _events(kraft_part, EventType.BROKER_REGISTERED)}
        assert rolled == {1, 2, 3}
        # The take-over said only what ZooKeeper never had (/kraft), no change of brokers,
        # partitions or the controller: it was all the same cluster.
        taken = records[switch : next(i for i in range(switch, len(records))
                                      if records[i]["op"] == "HEARTBEAT")]  # fmt: skip
        said = {e["type"] for r in taken for e in r["events"]}
        assert said <= _KRAFT_ONLY, [(r["path"], r["events"]) for r in taken if r["events"]]
        # No alert said twice: every FIRING of an alert is followed by its RESOLVED before the
        # next FIRING; and no epoch went back across the switch.
        by_id: dict[str, list[str]] = {}
        for alert in alerts.alerts:
            by_id.setdefault(alert["alert_id"], []).append(alert["status"])
        for alert_id, statuses in by_id.items():
            assert all(a != b for a, b in itertools.pairwise(statuses)), (
                alert_id, statuses,
            )  # fmt: skip
        assert not [a for a in alerts.alerts if a["rule"] == "controller_epoch_regression"]
        assert _events(records, EventType.CONTROLLER_EPOCH_CHANGED) == [
            e for e in _events(records, EventType.CONTROLLER_EPOCH_CHANGED)
            if e["epoch_after"] >= (e["epoch_before"] or 0)
        ]  # fmt: skip
    finally:
        for found in processes:
            stop(found.process, 0, signal.SIGKILL)
        for found in processes:
            print(f"--- {found.log_file} ---\n{found.tail(60)}")
        for name in stack.records():
            print(f"--- log of {name} ---\n{tail(stack.layout.log_file(name), 30)}")
        stack.down()
        changes.close()
        alerts.close()


def _wait_kraft_event(changes: ChangesTopic, kind: str, **fields: Any) -> None:
    """Waits for an event of `kind` in a record of the KRaft capture."""
    changes.wait_for(
        lambda r: r["source"]["mode"] == "kraft"
        and any(e["type"] == kind and all(e.get(k) == v for k, v in fields.items())
                for e in r["events"]),
        f"a KRaft capture's {kind} {fields}", 240,
    )  # fmt: skip


def migrated_ms(changes: ChangesTopic, event: dict[str, Any]) -> int:
    """The capture time of the record that said the metadata was migrated."""
    record = next(r for r in changes.records if r["seq"] == event["_seq"])
    return int(record["captured_ms"])
