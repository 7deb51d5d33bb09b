"""`zkcdc simulate build`: a Kafka 3.9 cluster's ZooKeeper tree, written in the order and with
the writes a real cluster makes: the skeleton every broker ensures, one registration per broker
from its own session, the controller's election, then each topic as the admin client and the
controller create it (config, assignment, then partition states in controller multis)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from zkcdc.ground.change_types import EventType
from zkcdc.simulate import formats, tree_walk
from zkcdc.simulate import partition_logic as logic
from zkcdc.simulate.cluster import SimulatedCluster, state_path
from zkcdc.simulate.errors import SimulateError
from zkcdc.simulate.expectation import Expectation
from zkcdc.simulate.topology import Assignment, ClusterShape, assign_replicas
from zkcdc.simulate.zk_writer import Check, Create, Op, ZkWriter, close, connect

# What every Kafka broker makes sure exists at start-up (KafkaZkClient.createTopLevelPaths).
SKELETON = (
    "/admin",
    "/admin/delete_topics",
    "/brokers",
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/cluster",
    "/config",
    "/config/changes",
    "/config/clients",
    "/config/brokers",
    "/config/topics",
    "/config/users",
    "/config/ips",
    "/consumers",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)
_OPS_PER_MULTI = 1000  # ~140 KB a request: far below ZooKeeper's 1 MB jute.maxbuffer


@dataclass(frozen=True)
class BuildOptions:
    shape: ClusterShape
    seed: int = 0
    cluster_id: str | None = None
    force: bool = False
    window: int = 16


def skeleton_ops(cluster_id: str) -> list[Op]:
    return [
        *(Create(path) for path in SKELETON),
        Create("/cluster/id", formats.cluster_id(cluster_id)),
        Create("/feature", formats.feature()),
        Create("/controller_epoch", formats.controller_epoch(0)),
    ]


def topic_ops(
    topic: str, topic_id: str, replicas: Assignment, controller_epoch: int, epoch_version: int
) -> Iterator[list[Op]]:
    """The multis that create one topic: its config and assignment (the admin's write), then
    its partition states, each multi fenced by a check on /controller_epoch's version."""
    yield [
        Create(f"/config/topics/{topic}", formats.entity_config({})),
        Create(f"/brokers/topics/{topic}", formats.topic_assignment(replicas, topic_id)),
    ]
    fence = Check("/controller_epoch", epoch_version)
    ops: list[Op] = [fence, Create(f"/brokers/topics/{topic}/partitions")]
    for partition, assigned in sorted(replicas.items()):
        state = logic.initial(assigned, controller_epoch)
        ops.append(Create(f"/brokers/topics/{topic}/partitions/{partition}"))
        ops.append(
            Create(
                state_path(topic, partition),
                formats.partition_state(
                    state.leader, state.leader_epoch, state.isr, state.controller_epoch
                ),
            )
        )
        if len(ops) >= _OPS_PER_MULTI:
            yield ops
            ops = [fence]
    if len(ops) > 1:
        yield ops


def prepare_chroot(hosts: str, force: bool) -> int:
    """Makes sure the chroot exists and is empty: a non-empty one is refused unless `force`,
    then emptied. The number of znodes removed."""
    servers, slash, rest = hosts.partition("/")
    chroot = (slash + rest).rstrip("/")
    root = connect(servers)
    try:
        top = chroot or "/"
        if root.exists(top):
            children = [c for c in root.get_children(top) if chroot or c != "zookeeper"]
            if children and not force:
                raise SimulateError(
                    f"{top} on {servers} is not empty ({len(children)} children, e.g. "
                    f"{sorted(children)[0]}): pass --force to replace it"
                )
            if children:
                return tree_walk.remove(ZkWriter(root, 32), root, top, keep_root=True)
        else:
            root.ensure_path(chroot)
        return 0
    finally:
        close(root)


def build(
    hosts: str,
    options: BuildOptions,
    now_ms: Callable[[], int],
    progress: Callable[[int], None],
) -> SimulatedCluster:
    """Writes the whole tree; the returned cluster holds the brokers' sessions (closing it is
    the cluster shutting down). `progress(n)` hears of every n znodes written."""
    shape = options.shape
    rng = random.Random(options.seed)
    removed = prepare_chroot(hosts, options.force)
    client = connect(hosts)
    expect = Expectation("build")
    if removed:
        expect.step(f"removed the {removed} znodes that were there (--force)")
    cluster = SimulatedCluster(hosts, client, expect, now_ms, window=options.window)
    try:
        cluster_id = options.cluster_id or formats.kafka_uuid(rng)
        cluster.run(skeleton_ops(cluster_id))
        progress(len(SKELETON) + 3)
        for broker in shape.broker_ids:
            cluster.register_broker(broker)
        progress(shape.brokers)
        cluster.elect_controller(shape.broker_ids[0])
        progress(1)
        _write_topics(cluster, shape, rng, progress)
    except BaseException:
        cluster.close()
        close(client)
        raise
    expect.step(
        f"cluster {cluster_id}: {shape.brokers} brokers, {shape.topics} topics, "
        f"{shape.partitions} partitions (replication factor {shape.replication_factor})"
    )
    return cluster


def _write_topics(
    cluster: SimulatedCluster,
    shape: ClusterShape,
    rng: random.Random,
    progress: Callable[[int], None],
) -> None:
    writer, expect = cluster.writer, cluster.expect
    epoch, epoch_version = cluster.controller_epoch, 1
    for topic in shape.topic_names:
        replicas = assign_replicas(
            shape.broker_ids, shape.partitions_per_topic, shape.replication_factor, rng
        )
        topic_id = formats.kafka_uuid(rng)
        for ops in topic_ops(topic, topic_id, replicas, epoch, epoch_version):
            writer.submit(ops)
            progress(sum(1 for op in ops if isinstance(op, Create)))
        expect.event(
            EventType.TOPIC_CREATED, f"/brokers/topics/{topic}", topic=topic, topic_id=topic_id
        )
        for partition in replicas:
            expect.event(
                EventType.PARTITION_STATE_CREATED,
                state_path(topic, partition),
                topic=topic,
                partition=partition,
            )
    writer.flush()
