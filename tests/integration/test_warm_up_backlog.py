"""Whether a live job warms up follows how far behind its topic's end it starts
(streaming/job/warm_up.worth_warming_up): counted on a real topic from the source's starting
offsets, or from a checkpoint's offsets log; when Kafka cannot say, the job warms up. No Spark:
the job's own run with a warm-up is test_replay.py's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.streaming.job.change_source import KafkaInput
from zkcdc.streaming.job.warm_up import backlog, warm_up_checkpoint, worth_warming_up

pytestmark = pytest.mark.integration


def _topic_of(cluster: Any, new_topic: Callable[..., str], per_partition: list[int]) -> str:
    topic = new_topic(partitions=len(per_partition))
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for partition, count in enumerate(per_partition):
        for n in range(count):
            producer.produce(topic, value=b"%d" % n, partition=partition)
    assert producer.flush(30) == 0
    return topic


def _offsets_log(checkpoint: Path, topic: str, batches: list[dict[str, int]]) -> None:
    """A query's offsets log as Spark writes it: a version line, the batch's metadata, then
    each source's offsets by topic and partition."""
    folder = checkpoint / "alerts" / "offsets"
    folder.mkdir(parents=True)
    for n, offsets in enumerate(batches):
        (folder / str(n)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{n}}}\n'
            + json.dumps({topic: {str(p): o for p, o in offsets.items()}})
        )
    (folder / f".{len(batches) - 1}.crc").write_bytes(b"")  # Hadoop's checksums beside them


def test_the_backlog_is_counted_from_where_the_job_reads_next(
    cluster: Any, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = _topic_of(cluster, new_topic, [10, 7, 3])
    kafka = KafkaConnection(bootstrap_servers=cluster.bootstrap_servers)
    fresh = tmp_path / "new"
    assert backlog(KafkaInput(kafka, topic, "earliest"), fresh / "alerts") == 20
    assert backlog(KafkaInput(kafka, topic, "latest"), fresh / "alerts") == 0
    named = json.dumps({topic: {"0": 4, "1": -1}})  # partition 2 not named: from its start
    assert backlog(KafkaInput(kafka, topic, named), fresh / "alerts") == 6 + 0 + 3
    resumed = tmp_path / "resumed"
    _offsets_log(resumed, topic, [{0: 2, 1: 2, 2: 2}, {0: 9, 1: 7, 2: 1}])
    # The last planned batch's ends, whatever the source's starting offsets say.
    assert backlog(KafkaInput(kafka, topic, "latest"), resumed / "alerts") == 1 + 0 + 2


def test_a_job_far_behind_skips_the_warm_up_and_its_leftover(
    cluster: Any, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = _topic_of(cluster, new_topic, [6, 6])
    source = KafkaInput(KafkaConnection(bootstrap_servers=cluster.bootstrap_servers), topic)
    behind = backlog(source, tmp_path / "near" / "alerts")
    assert worth_warming_up(behind, tmp_path / "near", skip_at=13)
    leftover = warm_up_checkpoint(tmp_path / "far")
    (leftover / "offsets").mkdir(parents=True)  # a warm-up killed halfway
    assert not worth_warming_up(behind, tmp_path / "far", skip_at=12)
    assert not leftover.exists()


def test_when_kafka_cannot_say_the_job_warms_up(tmp_path: Path) -> None:
    from zkcdc.stack.probes import free_port_block

    nobody = KafkaConnection(bootstrap_servers=f"127.0.0.1:{free_port_block(1)}")
    source = KafkaInput(nobody, "zkcdc.changes")
    assert backlog(source, tmp_path / "alerts", timeout_s=1.0) is None
    assert worth_warming_up(None, tmp_path, skip_at=0)
