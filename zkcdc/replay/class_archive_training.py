"""The training run of the Spark driver's class archive (streaming/job/class_archive.py): the
alert job over a small event log of one made-up incident (a broker down and back, its
partitions' ISRs shrinking and growing, one partition offline, a controller failover), in both
layouts and through both of its outputs, the way a real log takes it. Run as
`python -m zkcdc.replay.class_archive_training` by a JVM that records its classes at exit."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from zkcdc.capture.delivery.event_log import EventLogWriter
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
from zkcdc.ground.change_types import EventType, Op
from zkcdc.streaming.job.alert_runner import AlertJobOptions, run
from zkcdc.streaming.job.change_source import LogInput
from zkcdc.streaming.sinks.alert_sinks import SinkOptions

CLUSTER = "training"
START_MS = 1_800_000_000_000
PARTITIONS = 8


def training_records() -> list[ChangeRecord]:
    records: list[ChangeRecord] = []

    def add(op: Op, path: str, *events: ClusterEvent) -> None:
        ts = START_MS + 1000 * len(records)  # a second apart: for-durations pass
        after = None if op is Op.DELETE else Znode(b"{}", version=len(records))
        records.append(ChangeRecord(CLUSTER, len(records), op, path, None, after, None, ts, ts,
                                    events=tuple(events)))  # fmt: skip

    for broker in (1, 2, 3):
        add(Op.READ, f"/brokers/ids/{broker}",
            ClusterEvent(type=EventType.BROKER_REGISTERED, broker_id=broker, host="127.0.0.1",
                         port=9090 + broker))  # fmt: skip
    add(Op.READ, "/controller", ClusterEvent(type=EventType.CONTROLLER_ELECTED, broker_id=1))
    assignment: dict[str, tuple[int, ...]] = {str(p): (1, 2, 3) for p in range(PARTITIONS)}
    add(Op.READ, "/brokers/topics/t",
        ClusterEvent(type=EventType.TOPIC_CREATED, topic="t", assignment=assignment))  # fmt: skip
    state = "/brokers/topics/t/partitions/{}/state"
    for p in range(PARTITIONS):
        add(Op.READ, state.format(p),
            ClusterEvent(type=EventType.PARTITION_STATE_CREATED, topic="t", partition=p, leader=1,
                         isr=(1, 2, 3), leader_epoch=0, controller_epoch=1))  # fmt: skip
    add(Op.DELETE, "/brokers/ids/3", ClusterEvent(type=EventType.BROKER_DEREGISTERED, broker_id=3))
    for p in range(PARTITIONS):
        add(Op.UPDATE, state.format(p),
            ClusterEvent(type=EventType.ISR_SHRUNK, topic="t", partition=p, leader=1,
                         isr_before=(1, 2, 3), isr_after=(1, 2), removed=(3,),
                         controller_epoch=1))  # fmt: skip
    add(Op.UPDATE, state.format(0),
        ClusterEvent(type=EventType.PARTITION_OFFLINE, topic="t", partition=0, leader_before=1,
                     leader_after=-1, controller_epoch=1))  # fmt: skip
    add(Op.DELETE, "/controller", ClusterEvent(type=EventType.CONTROLLER_RESIGNED, broker_id=1))
    add(Op.CREATE, "/controller", ClusterEvent(type=EventType.CONTROLLER_ELECTED, broker_id=2))
    add(Op.CREATE, "/brokers/ids/3",
        ClusterEvent(type=EventType.BROKER_REGISTERED, broker_id=3, host="127.0.0.1",
                     port=9093))  # fmt: skip
    for p in range(PARTITIONS):
        add(Op.UPDATE, state.format(p),
            ClusterEvent(type=EventType.ISR_EXPANDED, topic="t", partition=p, leader=2,
                         isr_before=(1, 2), isr_after=(1, 2, 3), added=(3,),
                         controller_epoch=2))  # fmt: skip
    return records


def write_training_log(folder: Path) -> None:
    writer = EventLogWriter(folder, CLUSTER, now=lambda: START_MS / 1000, fsync=False)
    try:
        records = training_records()
        half = len(records) // 2  # two appends: two blocks, two micro-batches' worth
        writer.append([r.to_avro() for r in records[:half]])
        writer.append([r.to_avro() for r in records[half:]])
    finally:
        writer.close()


def train() -> None:
    """The training run: the alert job over a small log, in both layouts and through both of
    its outputs (foreachBatch, and files Spark writes), so their classes are in the archive."""
    with tempfile.TemporaryDirectory(prefix="zkcdc-class-archive-") as scratch:
        work = Path(scratch)
        write_training_log(work / "events")
        for shards, state_out in ((2, work / "state.jsonl"), (0, None)):
            options = AlertJobOptions(
                source=LogInput(work / "events"),
                sinks=SinkOptions(alerts_out=work / f"alerts-{shards}.jsonl"),
                checkpoint=work / f"checkpoint-{shards}",
                master="local[2]",
                partition_shards=shards,
                available_now=True,
                state_out=state_out,
            )
            run(options, threading.Event())


if __name__ == "__main__":
    train()
