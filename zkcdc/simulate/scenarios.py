"""The incidents `zkcdc simulate run` stages on a built cluster. Each one drives the cluster
through the writes Kafka would make and notes, as it goes, the events and alerts they cause."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from zkcdc.ground.change_types import EventType
from zkcdc.simulate import formats
from zkcdc.simulate import partition_logic as logic
from zkcdc.simulate.cluster import Key, SimulatedCluster
from zkcdc.simulate.consumer_group import ConsumerGroup
from zkcdc.simulate.errors import SimulateError
from zkcdc.simulate.zk_writer import Create, Delete, SetData


@dataclass(frozen=True)
class RunOptions:
    rate: float = 5.0  # changes per second, for the repeating scenarios
    duration_s: float = 5.0  # how long the repeating scenarios repeat
    broker: int | None = None
    topic: str | None = None
    group: str = "sim-group"
    rebalance: bool = True
    seed: int = 0
    sleep: Callable[[float], None] = field(default=time.sleep)
    monotonic: Callable[[], float] = field(default=time.monotonic)

    def repeats(self, at_least: int = 3) -> int:
        return max(at_least, round(self.rate * self.duration_s))

    def pace(self) -> Callable[[], None]:
        """A call per change that holds the run to `rate` changes per second."""
        start, count = self.monotonic(), [0]

        def wait() -> None:
            count[0] += 1
            ahead = start + count[0] / self.rate - self.monotonic()
            # Even when behind: sleep(0) is where a SIGTERM ends the run.
            self.sleep(max(0.0, ahead))

        return wait


Scenario = Callable[[SimulatedCluster, RunOptions], None]


# -- choosing what to act on ---------------------------------------------------------------------
def _victim_broker(cluster: SimulatedCluster, opts: RunOptions) -> int:
    if opts.broker is not None:
        if opts.broker not in cluster.brokers:
            raise SimulateError(f"broker {opts.broker} is not in this cluster {cluster.brokers}")
        return opts.broker
    hosting = [b for b in cluster.brokers if cluster.hosted_by(b) and b != cluster.controller]
    if not hosting:
        raise SimulateError("no broker hosts a partition: build the cluster with topics")
    return max(hosting)


def _partition(cluster: SimulatedCluster, opts: RunOptions, need_followers: bool = True) -> Key:
    keys = [k for k in cluster.partitions() if opts.topic in (None, k[0])]
    if not keys:
        raise SimulateError(
            f"no topic {opts.topic!r} in this cluster"
            if opts.topic
            else "this cluster has no topics: build it with --topics"
        )
    for key in keys[:1000]:
        state = cluster.state(key)
        if state.leader in cluster.live and (not need_followers or len(state.isr) > 1):
            return key
    raise SimulateError("no partition has a live leader and an in-sync follower")


def _topic(cluster: SimulatedCluster, opts: RunOptions) -> str:
    if opts.topic is not None:
        if opts.topic not in cluster.topics:
            raise SimulateError(f"no topic {opts.topic!r} in this cluster")
        return opts.topic
    if not cluster.topics:
        raise SimulateError("this cluster has no topics: build it with --topics")
    return sorted(cluster.topics)[-1]


# -- brokers and controller ----------------------------------------------------------------------
def broker_failure(cluster: SimulatedCluster, opts: RunOptions) -> None:
    cluster.broker_failure(_victim_broker(cluster, opts))


def broker_return(cluster: SimulatedCluster, opts: RunOptions) -> None:
    broker = _victim_broker(cluster, opts)
    if broker in cluster.registered:
        cluster.broker_failure(broker)
    cluster.broker_return(broker)


def controller_failover(cluster: SimulatedCluster, opts: RunOptions) -> None:
    cluster.failover_controller()


def controller_flapping(cluster: SimulatedCluster, opts: RunOptions) -> None:
    wait = opts.pace()
    for _ in range(opts.repeats()):
        cluster.failover_controller()
        wait()


def no_controller(cluster: SimulatedCluster, opts: RunOptions) -> None:
    cluster.resign_controller()
    cluster.expect.step("no broker took /controller over")


def broker_flapping(cluster: SimulatedCluster, opts: RunOptions) -> None:
    """A broker whose session keeps expiring (long GC pauses): it drops out and registers again
    faster than the controller reacts."""
    if opts.broker is not None:
        broker = _victim_broker(cluster, opts)
    else:
        others = [b for b in sorted(cluster.registered) if b != cluster.controller]
        if not others:
            raise SimulateError("broker flapping needs a live broker besides the controller")
        broker = others[-1]
    if broker == cluster.controller:
        raise SimulateError(f"broker {broker} is the controller: flap another one")
    wait = opts.pace()
    count = opts.repeats(at_least=2)
    for _ in range(count):
        cluster.kill_broker(broker)
        wait()
        cluster.register_broker(broker)
        wait()
    cluster.expect.step(f"broker {broker} dropped out and registered again {count} times")


def log_dir_failure(cluster: SimulatedCluster, opts: RunOptions) -> None:
    broker = _victim_broker(cluster, opts)
    session = cluster.sessions.get(broker, cluster.client)
    path = session.create(
        "/log_dir_event_notification/log_dir_event_", formats.log_dir_event(broker), sequence=True
    )
    cluster.expect.event(EventType.LOG_DIR_FAILED, path, broker_id=broker)
    cluster.expect.instant("log_dir_failure", f"broker/{broker}")
    # The controller handles the notification and deletes it; a watcher needs a read round
    # trip to see it first.
    opts.sleep(0.5)
    cluster.run([Delete(path)])
    cluster.expect.step(f"broker {broker} notified a failed log directory; the controller took it")


# -- partition state -----------------------------------------------------------------------------
def isr_flapping(cluster: SimulatedCluster, opts: RunOptions) -> None:
    key = _partition(cluster, opts)
    follower = cluster.state(key).isr[-1]
    if follower == cluster.state(key).leader:
        follower = cluster.state(key).isr[0]
    wait = opts.pace()
    for _ in range(opts.repeats()):
        state = cluster.state(key)
        epoch = cluster.controller_epoch
        cluster.write_states({key: logic.shrink_isr(state, follower, epoch)})
        wait()
        cluster.write_states({key: logic.expand_isr(cluster.state(key), follower, epoch)})
        wait()
    cluster.expect.step(f"broker {follower} left and rejoined the ISR of {key[0]}/{key[1]}")


def unclean_election(cluster: SimulatedCluster, opts: RunOptions) -> None:
    key = _partition(cluster, opts)
    leader = cluster.state(key).leader
    lagging = replace(cluster.state(key), isr=(leader,), controller_epoch=cluster.controller_epoch)
    cluster.write_states({key: lagging})
    cluster.expect.step(f"the followers of {key[0]}/{key[1]} fell out of its ISR")
    cluster.broker_failure(leader)
    _set_topic_config(cluster, key[0], {"unclean.leader.election.enable": "true"})
    new = logic.unclean_election(
        cluster.replicas(key), cluster.state(key), cluster.live, cluster.controller_epoch
    )
    if new is None:
        raise SimulateError(f"no live replica of {key[0]}/{key[1]} to elect")
    cluster.write_states({key: new})
    cluster.expect.step(f"broker {new.leader} elected leader of {key[0]}/{key[1]} uncleanly")


def zombie_controller(cluster: SimulatedCluster, opts: RunOptions) -> None:
    if cluster.controller_epoch < 2:
        cluster.failover_controller()
    key = _partition(cluster, opts)
    state = cluster.state(key)
    stale = cluster.controller_epoch - 1
    follower = next(b for b in state.isr if b != state.leader)
    zombie = logic.elect(state, state.leader, [b for b in state.isr if b != follower], stale)
    cluster.write_states({key: zombie}, as_controller=False)
    cluster.expect.step(
        f"a zombie controller (epoch {stale}, current {cluster.controller_epoch}) rewrote "
        f"{key[0]}/{key[1]}"
    )
    cluster.expect.instant("controller_epoch_regression", f"{key[0]}/{key[1]}")


def under_min_isr(cluster: SimulatedCluster, opts: RunOptions) -> None:
    key = _partition(cluster, opts)
    if len(cluster.replicas(key)) < 2:
        raise SimulateError("min.insync.replicas 2 needs a replication factor of 2 or more")
    _set_topic_config(cluster, key[0], {"min.insync.replicas": "2"})
    state = cluster.state(key)
    for follower in [b for b in state.isr if b != state.leader]:
        opts.sleep(0.5)  # each shrink its own version: a watcher reads one before the next
        cluster.write_states(
            {key: logic.shrink_isr(cluster.state(key), follower, cluster.controller_epoch)}
        )
    cluster.expect.step(f"{key[0]}/{key[1]} shrank to its leader alone, min.insync.replicas 2")


def leader_epoch_regression(cluster: SimulatedCluster, opts: RunOptions) -> None:
    """A state written back with an older leader epoch, as a restore of an old ZooKeeper backup
    or a buggy tool would: brokers then reject the leader's requests as stale."""
    key = _partition(cluster, opts, need_followers=False)
    state = cluster.state(key)
    bumped = logic.elect(state, state.leader, state.isr, cluster.controller_epoch)
    cluster.write_states({key: bumped})
    opts.sleep(0.5)  # a watcher reads the bumped epoch before it goes back
    cluster.write_states({key: replace(bumped, leader_epoch=state.leader_epoch)})
    cluster.expect.step(
        f"{key[0]}/{key[1]}'s leader epoch went to {bumped.leader_epoch}, then back to "
        f"{state.leader_epoch}"
    )


def preferred_imbalance(cluster: SimulatedCluster, opts: RunOptions) -> None:
    broker = _victim_broker(cluster, opts)
    led = [k for k in cluster.hosted_by(broker) if cluster.replicas(k)[0] == broker]
    states = cluster.states(led)
    changes = {}
    for key in led:
        state = states[key]
        others = [b for b in state.isr if b != broker and b in cluster.live]
        if state.leader == broker and others:
            changes[key] = logic.elect(state, others[0], state.isr, cluster.controller_epoch)
    if not changes:
        raise SimulateError(f"broker {broker} leads none of its preferred partitions")
    cluster.write_states(changes)
    cluster.expect.step(
        f"leadership of {len(changes)} partitions moved off their preferred {broker}"
    )


def storm(cluster: SimulatedCluster, opts: RunOptions) -> None:
    rng = random.Random(opts.seed)
    keys = cluster.partitions()
    if not keys:
        raise SimulateError("this cluster has no topics: build it with --topics")
    wait = opts.pace()
    count = opts.repeats()
    for i in range(count):
        key = keys[rng.randrange(len(keys))]
        state = cluster.state(key)
        replicas = cluster.replicas(key)
        epoch = cluster.controller_epoch
        live_out = [b for b in replicas if b not in state.isr and b in cluster.live]
        followers = [b for b in state.isr if b != state.leader]
        if i % 5 == 4 and followers and state.leader != logic.NO_LEADER:
            new = logic.elect(state, followers[0], state.isr, epoch)
        elif live_out and state.leader != logic.NO_LEADER:
            new = logic.expand_isr(state, live_out[0], epoch)
        elif followers:
            new = logic.shrink_isr(state, followers[-1], epoch)
        else:
            continue
        cluster.write_states({key: new}, wait=False)  # pipelined: a storm outruns round trips
        wait()
    cluster.writer.flush()
    cluster.expect.step(f"{count} partition state changes at {opts.rate:g}/s")


# -- admin requests and configs ------------------------------------------------------------------
def stuck_reassignment(cluster: SimulatedCluster, opts: RunOptions) -> None:
    key = _partition(cluster, opts, need_followers=False)
    topic, partition = key
    current = cluster.replicas(key)
    spare = [b for b in cluster.brokers if b not in current]
    if not spare:
        raise SimulateError("a reassignment needs a broker outside the partition's replicas")
    target = (*current[:-1], spare[0])
    if cluster.client.exists("/admin/reassign_partitions"):
        raise SimulateError("a reassignment is in progress already (/admin/reassign_partitions)")
    cluster.run(
        [Create("/admin/reassign_partitions", formats.reassignment([(topic, partition, target)]))]
    )
    cluster.expect.event(EventType.REASSIGNMENT_REQUESTED, "/admin/reassign_partitions")
    # The controller starts it: the full replica set with adding/removing, then a new leader
    # epoch; the new replica never catches up, so it never completes.
    adding, removing = (spare[0],), (current[-1],)
    replicas = dict(cluster.topics[topic].replicas)
    replicas[partition] = (*target, *removing)
    data = formats.topic_assignment(
        replicas, cluster.topics[topic].topic_id, {partition: adding}, {partition: removing}
    )
    cluster.run([SetData(f"/brokers/topics/{topic}", data)])
    cluster.expect.event(EventType.REPLICAS_CHANGED, f"/brokers/topics/{topic}", adding=adding)
    state = cluster.state(key)
    cluster.write_states(
        {key: logic.elect(state, state.leader, state.isr, cluster.controller_epoch)}
    )
    cluster.expect.step(f"reassignment of {topic}/{partition} to {list(target)} requested, stuck")
    cluster.expect.condition("reassignment_stuck", f"{topic}/{partition}", True)


def _request_deletion(cluster: SimulatedCluster, topic: str) -> str:
    path = f"/admin/delete_topics/{topic}"
    if cluster.client.exists(path):
        cluster.expect.step(f"deletion of {topic} was requested already")
        return path
    cluster.run([Create(path)])
    cluster.expect.event(EventType.TOPIC_DELETION_REQUESTED, path, topic=topic)
    cluster.expect.condition("topic_deletion_stuck", f"topic/{topic}", True)
    return path


def topic_deletion(cluster: SimulatedCluster, opts: RunOptions) -> None:
    topic = _topic(cluster, opts)
    request = _request_deletion(cluster, topic)
    cluster.delete_tree(f"/brokers/topics/{topic}")
    cluster.run([Delete(f"/config/topics/{topic}"), Delete(request)])
    del cluster.topics[topic]
    cluster.expect.event(EventType.TOPIC_DELETED, f"/brokers/topics/{topic}", topic=topic)
    cluster.expect.event(EventType.TOPIC_DELETION_COMPLETED, request, topic=topic)
    cluster.expect.condition("topic_deletion_stuck", f"topic/{topic}", False)
    cluster.expect.step(f"topic {topic} deleted")


def stuck_topic_deletion(cluster: SimulatedCluster, opts: RunOptions) -> None:
    topic = _topic(cluster, opts)
    _request_deletion(cluster, topic)
    cluster.expect.step(f"deletion of {topic} requested; the controller never completes it")


def _set_topic_config(cluster: SimulatedCluster, topic: str, changes: dict[str, str]) -> None:
    path = f"/config/topics/{topic}"
    data, _ = cluster.client.get(path)
    config = {**json.loads(data)["config"], **changes}
    cluster.run(
        [
            SetData(path, formats.entity_config(config)),
            Create(
                "/config/changes/config_change_",
                formats.config_change("topics", topic),
                sequence=True,
            ),
        ]
    )
    cluster.expect.event(
        EventType.CONFIG_CHANGED, path, entity_name=topic, changed_keys=sorted(changes)
    )
    cluster.topic_config_changed(topic, config)
    cluster.expect.step(f"topic {topic} config set {changes}")


def config_change(cluster: SimulatedCluster, opts: RunOptions) -> None:
    topic = _topic(cluster, opts)
    retention = str(3_600_000 + cluster.now_ms() % 86_400_000)  # differs from the last one
    _set_topic_config(cluster, topic, {"retention.ms": retention})


# -- the legacy consumer tree --------------------------------------------------------------------
def _group(cluster: SimulatedCluster, opts: RunOptions, consumers: int = 3) -> ConsumerGroup:
    topic = opts.topic or (sorted(cluster.topics)[0] if cluster.topics else None)
    if topic is None or topic not in cluster.topics:
        raise SimulateError(
            f"no topic {topic!r} in this cluster"
            if topic
            else "this cluster has no topics: build it with --topics"
        )
    group = ConsumerGroup(cluster, opts.group, topic)
    cluster.on_close(group.close)
    group.join(consumers)
    group.rebalance()
    return group


def consumer_group(cluster: SimulatedCluster, opts: RunOptions) -> None:
    group = _group(cluster, opts)
    base = cluster.now_ms() % 1_000_000  # offsets only grow, also across runs
    for partition in sorted(group.owners):
        group.commit(partition, base + 100)
    opts.sleep(0.5)  # each commit its own version: a watcher reads the first before the second
    for partition in sorted(group.owners):
        group.commit(partition, base + 250)


def consumer_leaves(cluster: SimulatedCluster, opts: RunOptions) -> None:
    group = _group(cluster, opts)
    leaving = sorted(group.sessions)[-1]
    # The group consumes a while first: an owner znode gone within a watcher's read round trip
    # after its creation would leave no trace to compare against.
    opts.sleep(0.5)
    group.leave(leaving)
    if opts.rebalance:
        group.rebalance()
    else:
        cluster.expect.step("no rebalance followed: the leaver's partitions stay unowned")


def consumer_idle(cluster: SimulatedCluster, opts: RunOptions) -> None:
    topic = opts.topic or (sorted(cluster.topics)[0] if cluster.topics else "")
    partitions = len(cluster.topics[topic].replicas) if topic in cluster.topics else 0
    _group(cluster, opts, consumers=partitions + 1)
    cluster.expect.step(f"{partitions + 1} consumers for {partitions} partitions: one gets none")


def consumer_owner_mismatch(cluster: SimulatedCluster, opts: RunOptions) -> None:
    group = _group(cluster, opts, consumers=2)
    threads = sorted(set(group.owners.values()))
    if len(threads) < 2:
        raise SimulateError("an owner mismatch needs a topic of 2 or more partitions")
    partition = min(p for p, t in group.owners.items() if t == threads[0])
    opts.sleep(0.5)  # the owner znode is seen before it goes
    group.claim(partition, threads[1], pause=lambda: opts.sleep(0.5))


def offset_regression(cluster: SimulatedCluster, opts: RunOptions) -> None:
    group = _group(cluster, opts, consumers=1)
    partition = min(group.owners)
    high = cluster.now_ms() % 1_000_000 + 10_000
    group.commit(partition, high)
    opts.sleep(0.5)  # a watcher reads the high offset before it goes back
    group.commit(partition, high - 5_000)
    cluster.expect.step(f"offset of partition {partition} went back from {high} to {high - 5000}")


SCENARIOS: dict[str, tuple[Scenario, str]] = {
    "broker-failure": (broker_failure, "a broker's session closes; the controller follows"),
    "broker-return": (broker_return, "a broker fails, then registers again and catches up"),
    "controller-failover": (controller_failover, "the controller resigns, another wins"),
    "controller-flapping": (controller_flapping, "the controller moves at --rate"),
    "no-controller": (no_controller, "the controller resigns and nobody takes over"),
    "broker-flapping": (broker_flapping, "a broker drops out and re-registers at --rate"),
    "log-dir-failure": (log_dir_failure, "a broker notifies a failed log directory"),
    "under-min-isr": (under_min_isr, "an ISR shrinks below the topic's min.insync.replicas"),
    "leader-epoch-regression": (leader_epoch_regression, "a leader epoch written backwards"),
    "isr-flapping": (isr_flapping, "a follower leaves and rejoins an ISR at --rate"),
    "unclean-election": (unclean_election, "an out-of-sync replica becomes leader"),
    "zombie-controller": (zombie_controller, "a state write with a stale controller epoch"),
    "stuck-reassignment": (stuck_reassignment, "a reassignment that never completes"),
    "topic-deletion": (topic_deletion, "a topic deleted through /admin/delete_topics"),
    "stuck-topic-deletion": (stuck_topic_deletion, "a deletion request nobody completes"),
    "preferred-imbalance": (preferred_imbalance, "a broker loses leadership it prefers"),
    "config-change": (config_change, "a topic config changes, with its notification"),
    "consumer-group": (consumer_group, "a legacy consumer group joins, owns, commits"),
    "consumer-leaves": (consumer_leaves, "a consumer leaves (--no-rebalance: none follows)"),
    "offset-regression": (offset_regression, "a committed offset goes backwards"),
    "consumer-idle": (consumer_idle, "more consumers than partitions: one idles"),
    "consumer-owner-mismatch": (consumer_owner_mismatch, "a partition owned against the range"),
    "storm": (storm, "partition state churn at --rate for --duration"),
}
