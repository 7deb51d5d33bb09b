"""`zkcdc capture --source kraft` on a real KRaft cluster: the same change records and events as
on ZooKeeper (ISR shrunk and expanded with the exact ISRs, controller changes), the KRaft-only
events (fenced, unfenced, controlled shutdown), and each metadata record given exactly once
across kill -9 and restarts."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from capture_harness import CaptureProcess, ChangesTopic
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import wait_until

from zkcdc.capture.delivery.event_log import log_files, read_records
from zkcdc.ground import waiting
from zkcdc.ground.change_types import EventType
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack

pytestmark = pytest.mark.integration


class Captures:
    """KRaft captures of this test, stopped (SIGKILL if need be) with their logs shown."""

    def __init__(self, stack: LocalStack, base: Path) -> None:
        self.stack, self.base = stack, base
        self.processes: list[CaptureProcess] = []

    def start(
        self, metadata_dir: Path, name: str, *extra: str, env: dict[str, str] | None = None
    ) -> CaptureProcess:
        """A capture into an event log of its own (and the topic given in `extra`, if any);
        it asks the controllers for the high watermark."""
        info = self.stack.info()
        kafka = ["--bootstrap-servers", info.bootstrap_servers] if "--topic" in extra else []
        process = CaptureProcess(
            ["--source", "kraft", "--metadata-log-dir", str(metadata_dir),
             "--bootstrap-controllers", info.bootstrap_controllers, *kafka,
             "--state-dir", str(self.base / f"state-{name}"),
             "--event-log", str(self.base / f"log-{name}"), *extra],
            self.base / f"capture-{name}-{len(self.processes)}.log",
            env,
        )  # fmt: skip
        self.processes.append(process)
        return process


@pytest.fixture
def captures(kraft_stack: LocalStack, tmp_path: Path) -> Iterator[Captures]:
    found = Captures(kraft_stack, tmp_path)
    yield found
    for process in found.processes:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGKILL)
            process.process.wait(30)
        print(f"--- capture log {process.log_file} ---\n{process.tail(60)}")


def _topic(stack: LocalStack, partitions: int = 3) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": stack.info().bootstrap_servers})
    create_topics(lambda: admin, [NewTopic(name, partitions, 3)], 60)
    return name


def _log_records(folder: Path, cluster: str) -> list[dict[str, Any]]:
    return [r for f in log_files(folder, cluster) for r in read_records(f, lambda d: None)]


def _cluster(process: CaptureProcess) -> str:
    for line in process.log_lines():
        if line.get("cluster"):
            return str(line["cluster"])
    raise AssertionError("the capture never logged its cluster")


def test_a_follower_stopped_and_started_gives_the_isr_changes_and_its_fencing(
    kraft_stack: LocalStack, captures: Captures, tmp_path: Path
) -> None:
    info = kraft_stack.info()
    changes = ChangesTopic(info.bootstrap_servers, f"zkcdc.changes.kraft-{uuid.uuid4().hex[:6]}")
    try:
        topic = _topic(kraft_stack)
        capture = captures.start(info.metadata_log_dirs[0], "a", "--topic", changes.topic)
        capture.wait_logged("in sync")
        state = changes.wait_event(EventType.PARTITION_STATE_CREATED, topic=topic, partition=0)
        follower = next(b for b in state["isr"] if b != state["leader"])
        full = list(state["isr"])
        after = changes.records[-1]["seq"] if changes.records else 0

        kraft_stack.stop_broker(follower, signal.SIGTERM)
        shrunk = changes.wait_event(EventType.ISR_SHRUNK, topic=topic, partition=0, after_seq=after)
        assert shrunk["isr_before"] == full
        assert shrunk["isr_after"] == [b for b in full if b != follower]
        assert shrunk["removed"] == [follower]
        changes.wait_event(
            EventType.BROKER_CONTROLLED_SHUTDOWN, broker_id=follower, after_seq=after
        )
        changes.wait_event(EventType.BROKER_FENCED, broker_id=follower, after_seq=after)
        changes.wait_event(EventType.BROKER_DEREGISTERED, broker_id=follower, after_seq=after)

        kraft_stack.start_broker(follower)
        expanded = changes.wait_event(
            EventType.ISR_EXPANDED, topic=topic, partition=0, after_seq=shrunk["_seq"]
        )
        assert expanded["added"] == [follower]
        assert sorted(expanded["isr_after"]) == sorted(full)
        changes.wait_event(EventType.BROKER_UNFENCED, broker_id=follower, after_seq=shrunk["_seq"])
        changes.wait_event(
            EventType.BROKER_REGISTERED, broker_id=follower, after_seq=shrunk["_seq"]
        )
        modes = {r["source"]["mode"] for r in changes.records}
        assert modes == {"kraft"}
        assert capture.stop() == 0
    finally:
        changes.close()


def test_the_active_controller_killed_gives_the_controller_events(
    kraft_stack: LocalStack, captures: Captures
) -> None:
    leader = kraft_stack.quorum_leader()
    assert leader is not None
    leader_id, epoch = leader
    # Read beside a controller that stays up: the killed one's files stop with it.
    other = next(c for c in kraft_stack.layout.controllers if c.node_id != leader_id)
    capture = captures.start(other.metadata_dir, "controller")
    capture.wait_logged("in sync")
    name = f"controller-{leader_id}"
    kraft_stack.stop_controller(name, signal.SIGKILL)
    try:
        new_id, new_epoch = waiting.wait_until(
            lambda: now if (now := kraft_stack.quorum_leader()) and now[0] != leader_id else None,
            60, what="a new active controller", interval_s=0.5,
        )  # fmt: skip
        cluster = _cluster(capture)

        def events() -> list[dict[str, Any]]:
            records = _log_records(tmp_path_of(captures, "controller"), cluster)
            return [e for r in records if r["op"] != "READ" for e in r["events"]]

        waiting.wait_until(
            lambda: any(e["type"] == EventType.CONTROLLER_ELECTED and e["broker_id"] == new_id
                        for e in events()),
            60, what="CONTROLLER_ELECTED for the new controller", interval_s=0.5,
        )  # fmt: skip
        got = events()
        assert any(
            e["type"] == EventType.CONTROLLER_RESIGNED and e["broker_id"] == leader_id for e in got
        )
        assert any(e["type"] == EventType.CONTROLLER_EPOCH_CHANGED and e["epoch_after"] == new_epoch
                   and e["epoch_before"] == epoch for e in got)  # fmt: skip
    finally:
        kraft_stack.start_controller(name)


def tmp_path_of(captures: Captures, name: str) -> Path:
    return captures.base / f"log-{name}"


def _delete(admin: AdminClient, names: list[str]) -> None:
    """Deleted, retried while a broker has not yet learnt of topics just created; a topic an
    earlier try deleted (its answer lost) is not asked for again."""
    for attempt in range(40):
        try:
            for future in admin.delete_topics(names, operation_timeout=30).values():
                future.result(timeout=60)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or attempt == 39:
                raise
            names = [n for n in names if n in admin.list_topics(timeout=10).topics]
            if not names:
                return
            time.sleep(0.25)


def _changes_of(records: list[dict[str, Any]]) -> list[tuple[str, str, int, Any]]:
    """What must be the same in an interrupted capture and a steady one: every change, with
    the metadata offset it came from and the data it left."""
    return [
        (r["op"], r["path"], r["zxid"], None if r["after"] is None else r["after"]["data"])
        for r in records
        if r["op"] not in ("HEARTBEAT", "READ")
    ]


def test_kill_9_and_restart_gives_each_metadata_record_exactly_once(
    kraft_stack: LocalStack, captures: Captures
) -> None:
    directory = kraft_stack.info().metadata_log_dirs[1]
    steady = captures.start(directory, "steady")
    steady.wait_logged("in sync")
    killed = captures.start(directory, "killed")
    killed.wait_logged("in sync")
    admin = AdminClient({"bootstrap.servers": kraft_stack.info().bootstrap_servers})
    for round_ in range(4):
        names = [f"k{round_}-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
        create_topics(lambda: admin, [NewTopic(n, 4, 2) for n in names], 60)
        time.sleep(0.2 * round_)  # fixed wait: killed at another point of the stream each time
        killed.process.send_signal(signal.SIGKILL)
        killed.process.wait(30)
        _delete(admin, names[:2])
        killed = captures.start(directory, "killed")
        killed.wait_logged("in sync")
    cluster = _cluster(steady)

    def both_past_the_last_change() -> bool:
        logs = [_changes_of(_log_records(tmp_path_of(captures, n), cluster))
                for n in ("steady", "killed")]  # fmt: skip
        deleted = [{path for op, path, *_ in log if op == "DELETE"} for log in logs]
        last = {f"/brokers/topics/{name}" for name in names[:2]}
        return all(last <= gone for gone in deleted) and logs[0] == logs[1]

    wait_until(both_past_the_last_change, what="both captures past the last change")
    for process in (steady, killed):
        assert process.stop() == 0
    steady_records = _log_records(tmp_path_of(captures, "steady"), cluster)
    killed_records = _log_records(tmp_path_of(captures, "killed"), cluster)
    seqs = [r["seq"] for r in killed_records]
    assert seqs == list(range(1, len(seqs) + 1)), "a seq missing or given twice"
    assert _changes_of(killed_records) == _changes_of(steady_records)
    assert len(_changes_of(steady_records)) > 100


def _saved_tree(state_dir: Path) -> tuple[int, int] | None:
    """The seq and metadata offset of the tree a capture last saved, if it saved one."""
    found = sorted(state_dir.rglob("tree.avro"))
    if not found:
        return None
    with found[0].open("rb") as saved:
        meta = fastavro.reader(saved).metadata
    return int(meta["zkcdc.seq"]), int(meta["zkcdc.zxid"])


def test_an_idle_capture_keeps_its_tree_as_the_log_moves_and_resumes_from_its_last_heartbeat(
    kraft_stack: LocalStack, captures: Captures
) -> None:
    """The controller appends NoOps while nothing changes, so the position moves with nothing
    to record. The saved tree is not written again for that (checkpoints every 0.2 s here), nor
    at the stop, and a restart from it takes the position of the last heartbeat in its log:
    what changed while it was down comes once, as a steady capture saw it, and nothing
    before."""
    directory = kraft_stack.info().metadata_log_dirs[1]
    steady = captures.start(directory, "steady")
    idle = captures.start(directory, "idle", env={"ZKCDC_CHECKPOINT_S": "0.2"})
    idle.wait_logged("in sync")
    state_dir, log_dir = captures.base / "state-idle", tmp_path_of(captures, "idle")
    cluster = _cluster(idle)
    wait_until(lambda: _saved_tree(state_dir) is not None, what="a saved tree")

    def beats_past_the_saved_tree() -> bool:
        saved = _saved_tree(state_dir)
        assert saved is not None
        beats = [r for r in _log_records(log_dir, cluster)
                 if r["seq"] > saved[0] and r["op"] == "HEARTBEAT" and r["zxid"] > saved[1]]  # fmt: skip
        return len(beats) >= 3  # each a second apart: many checkpoints passed meanwhile

    wait_until(beats_past_the_saved_tree, what="heartbeats at a later position, the tree kept")
    saved = _saved_tree(state_dir)
    assert idle.stop() == 0
    assert saved is not None and _saved_tree(state_dir) == saved  # a stop writes none either
    before = _log_records(log_dir, cluster)
    assert all(r["op"] == "HEARTBEAT" for r in before if r["seq"] > saved[0])
    last_beat = max(r["zxid"] for r in before if r["op"] == "HEARTBEAT")

    admin = AdminClient({"bootstrap.servers": kraft_stack.info().bootstrap_servers})
    name = f"idle-{uuid.uuid4().hex[:8]}"
    create_topics(lambda: admin, [NewTopic(name, 2, 2)], 60)
    restarted = captures.start(directory, "idle", env={"ZKCDC_CHECKPOINT_S": "0.2"})
    restarted.wait_logged("in sync")
    rebuilt = [
        line for line in restarted.log_lines() if line.get("event") == "metadata image rebuilt"
    ]
    assert [line["position"] for line in rebuilt] == [last_beat]  # not a re-sync from a snapshot

    def both_have_the_topic() -> bool:
        logs = [_changes_of(_log_records(tmp_path_of(captures, n), cluster))
                for n in ("steady", "idle")]  # fmt: skip
        topic = f"/brokers/topics/{name}"
        return all(any(path == topic for _, path, *_ in log) for log in logs)

    wait_until(both_have_the_topic, what="both captures to record the new topic")
    for process in (steady, restarted):
        assert process.stop() == 0
    records = _log_records(log_dir, cluster)
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(1, len(seqs) + 1)), "a seq missing or given twice"
    after = [r for r in records[len(before) :] if r["op"] not in ("HEARTBEAT", "READ")]
    assert after and all(r["zxid"] > last_beat for r in after)
    # From the stop on, as the steady capture saw it (before the idle one's start, the two may
    # differ: a change the steady one recorded can be part of the idle one's snapshot).
    end = records[-1]["zxid"]
    steady_changes = _changes_of(_log_records(tmp_path_of(captures, "steady"), cluster))
    assert _changes_of(after) == [c for c in steady_changes if last_beat < c[2] <= end]
