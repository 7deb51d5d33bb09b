"""A simulated cluster on ZooKeeper: the built tree read back, one session per live broker, and
the control-plane writes Kafka's brokers and controller would make, each noted in an
Expectation. Scenarios compose these; the state transitions come from `partition_logic`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from zkcdc.ground.change_types import EventType
from zkcdc.simulate import formats, tree_walk
from zkcdc.simulate import partition_logic as logic
from zkcdc.simulate.errors import SimulateError
from zkcdc.simulate.expectation import Expectation
from zkcdc.simulate.partition_logic import PartitionState
from zkcdc.simulate.zk_writer import (
    Check,
    Create,
    Op,
    SetData,
    ZkWriter,
    close,
    connect,
    run_multi,
)

Key = tuple[str, int]


def broker_host(broker_id: int) -> str:
    return f"broker-{broker_id}.sim.invalid"  # never resolvable: nothing should dial it


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: str
    replicas: dict[int, tuple[int, ...]]


class SimulatedCluster:
    def __init__(
        self,
        hosts: str,
        client: KazooClient,
        expect: Expectation,
        now_ms: Callable[[], int],
        window: int = 64,
    ) -> None:
        self.hosts = hosts  # host:port[,..]/chroot, for the brokers' own sessions
        self.client = client
        self.writer = ZkWriter(client, window)
        self.expect = expect
        self.now_ms = now_ms
        self.topics: dict[str, Topic] = {}
        self.min_insync: dict[str, int] = {}  # topics' min.insync.replicas, where set
        self.sessions: dict[int, KazooClient] = {}
        self.registered: set[int] = set()
        self.controller: int | None = None
        self.last_controller: int | None = None  # what a watcher saw hold /controller last
        self.controller_epoch = 0
        self._epoch_version = 0
        self._states: dict[Key, tuple[PartitionState, int]] = {}
        self._closers: list[Callable[[], None]] = []
        # Per broker: partitions it is the preferred leader of, and of those, not led by it.
        self._preferred: Counter[int] = Counter()
        self._not_led: Counter[int] = Counter()

    # -- reading the built tree ---------------------------------------------------------------
    def load(self) -> None:
        if not self.client.exists("/cluster/id") or not self.client.exists("/brokers/topics"):
            raise SimulateError(
                "no simulated cluster here: run `zkcdc simulate build` on this chroot first"
            )
        names = self.client.get_children("/brokers/topics")
        answers = [(n, self.client.get_async(f"/brokers/topics/{n}")) for n in names]
        for name, answer in answers:
            obj = json.loads(answer.get(timeout=30)[0])
            replicas = {int(p): tuple(r) for p, r in obj["partitions"].items()}
            self.topics[name] = Topic(name, obj.get("topic_id", ""), replicas)
        configs = [(n, self.client.get_async(f"/config/topics/{n}")) for n in names]
        for name, answer in configs:
            try:
                config = json.loads(answer.get(timeout=30)[0]).get("config", {})
            except NoNodeError:
                continue
            self._note_min_insync(name, config)
        self.registered = {int(b) for b in self.client.get_children("/brokers/ids")}
        self._read_controller()

    def _read_controller(self) -> None:
        data, stat = self.client.get("/controller_epoch")
        self.controller_epoch, self._epoch_version = int(data), stat.version
        try:
            self.controller = int(json.loads(self.client.get("/controller")[0])["brokerid"])
        except NoNodeError:
            self.controller = None
        self.last_controller = self.controller

    @property
    def brokers(self) -> tuple[int, ...]:
        hosting = {b for t in self.topics.values() for r in t.replicas.values() for b in r}
        return tuple(sorted(hosting | self.registered | set(self.sessions)))

    @property
    def live(self) -> set[int]:
        return set(self.registered)

    def partitions(self) -> list[Key]:
        return [(t.name, p) for t in self.topics.values() for p in sorted(t.replicas)]

    def hosted_by(self, broker: int) -> list[Key]:
        return [k for k in self.partitions() if broker in self.replicas(k)]

    def replicas(self, key: Key) -> tuple[int, ...]:
        return self.topics[key[0]].replicas[key[1]]

    def states(self, keys: Iterable[Key]) -> dict[Key, PartitionState]:
        """Current states (read once, then kept up to date by this process's own writes)."""
        wanted = [k for k in keys if k not in self._states]
        for chunk_start in range(0, len(wanted), 2000):
            chunk = wanted[chunk_start : chunk_start + 2000]
            answers = [(k, self.client.get_async(state_path(*k))) for k in chunk]
            for key, answer in answers:
                data, stat = answer.get(timeout=60)
                obj = json.loads(data)
                state = PartitionState(
                    obj["leader"], obj["leader_epoch"], tuple(obj["isr"]), obj["controller_epoch"]
                )
                self._states[key] = (state, stat.version)
                self._count_preferred(key, state, +1)
        return {k: self._states[k][0] for k in keys}

    def _count_preferred(self, key: Key, state: PartitionState, sign: int) -> int:
        preferred = self.replicas(key)[0]
        self._preferred[preferred] += sign
        if state.leader != preferred:
            self._not_led[preferred] += sign
        return preferred

    def _expect_imbalance(self, brokers: Iterable[int]) -> None:
        ratio = self.expect.forecast.settings.preferred_leader_imbalance_ratio
        for broker in brokers:
            total = self._preferred[broker]
            share = self._not_led[broker] / total if total else 0.0
            active = broker in self.registered and share > ratio
            self.expect.condition("preferred_leader_imbalance", f"broker/{broker}", active)

    def state(self, key: Key) -> PartitionState:
        return self.states([key])[key]

    def _note_min_insync(self, topic: str, config: Mapping[str, str]) -> None:
        value = str(config.get("min.insync.replicas", ""))
        if value.isdigit():
            self.min_insync[topic] = int(value)
        else:
            self.min_insync.pop(topic, None)

    def topic_config_changed(self, topic: str, config: Mapping[str, str]) -> None:
        """A topic's config is now `config`: min.insync.replicas may open or close conditions of
        its partitions whose states this process knows."""
        self._note_min_insync(topic, config)
        for key, (state, _) in self._states.items():
            if key[0] == topic:
                self._expect_min_insync(key, state)

    def _expect_min_insync(self, key: Key, state: PartitionState) -> None:
        default = self.expect.forecast.settings.default_min_insync_replicas
        below = len(state.isr) < self.min_insync.get(key[0], default)
        online = state.leader != logic.NO_LEADER
        self.expect.condition("under_min_isr", f"{key[0]}/{key[1]}", online and below)

    # -- brokers ------------------------------------------------------------------------------
    def start(self) -> None:
        """Brings the cluster up and healthy: every known broker registered, a controller elected,
        every ISR full and every preferred replica leading, so each scenario starts alike."""
        down = [b for b in self.brokers if b not in self.registered]
        for broker in down:
            self.register_broker(broker)
        if self.controller is None:
            self.elect_controller(min(self.registered))
        keys = self.partitions()
        current = self.states(keys)
        changes = {}
        for key in keys:
            new = logic.healthy(self.replicas(key), current[key], self.live, self.controller_epoch)
            if new is not None:
                changes[key] = new
        self.write_states(changes)
        if changes:
            self.expect.step(f"{len(changes)} partitions back to full ISR and preferred leader")

    def register_broker(self, broker: int) -> None:
        session = connect(self.hosts)
        data = formats.broker_registration(broker, broker_host(broker), 9092, self.now_ms())
        try:
            session.create(f"/brokers/ids/{broker}", data, ephemeral=True)
        except NodeExistsError as exc:
            close(session)
            raise SimulateError(f"broker {broker} is registered already") from exc
        self.sessions[broker] = session
        self.registered.add(broker)
        self.expect.step(f"broker {broker} registered (a session of its own)")
        self.expect.event(EventType.BROKER_REGISTERED, f"/brokers/ids/{broker}", broker_id=broker)
        self.expect.condition("broker_down", f"broker/{broker}", False)
        self.expect.condition("no_active_controller", "controller", self.controller is None)
        self._expect_imbalance([broker])

    def kill_broker(self, broker: int) -> None:
        """The broker's session closes, so ZooKeeper drops its registration (and /controller,
        if it held it)."""
        session = self.sessions.pop(broker, None)
        if session is not None:
            close(session)
        else:  # registered by another process (`build --hold`): the same change in the tree
            self.client.delete(f"/brokers/ids/{broker}")
        self.registered.discard(broker)
        self.expect.step(f"broker {broker}'s session closed")
        self.expect.event(EventType.BROKER_DEREGISTERED, f"/brokers/ids/{broker}", broker_id=broker)
        self.expect.condition("broker_down", f"broker/{broker}", True)
        if self.controller == broker:
            self.controller, self.last_controller = None, broker
            self.expect.event(EventType.CONTROLLER_RESIGNED, "/controller", True, broker_id=broker)
        no_controller = self.controller is None and bool(self.registered)
        self.expect.condition("no_active_controller", "controller", no_controller)
        self._expect_imbalance([broker])

    # -- the controller -----------------------------------------------------------------------
    def elect_controller(self, broker: int) -> None:
        """`broker` wins the /controller race: the znode from its session and the epoch + 1 in
        one multi, conditional on the epoch's version, as KafkaZkClient does."""
        session = self.sessions.get(broker, self.client)
        epoch = self.controller_epoch + 1
        ops: list[Op] = [
            Create("/controller", formats.controller(broker, self.now_ms()), ephemeral=True),
            SetData("/controller_epoch", formats.controller_epoch(epoch), self._epoch_version),
        ]
        self.writer.flush()
        run_multi(session, ops)
        before = self.controller_epoch
        if self.last_controller is not None:
            self.expect.instant("controller_failover", "controller")
        self.controller, self.controller_epoch = broker, epoch
        self.last_controller = broker
        self.expect.condition("no_active_controller", "controller", False)
        self._epoch_version += 1
        self.expect.step(f"broker {broker} elected controller, controller epoch {epoch}")
        self.expect.event(EventType.CONTROLLER_ELECTED, "/controller", broker_id=broker)
        self.expect.event(
            EventType.CONTROLLER_EPOCH_CHANGED,
            "/controller_epoch",
            epoch_before=before,
            epoch_after=epoch,
        )

    def resign_controller(self) -> int | None:
        """The controller loses /controller (its session expired): no controller until the next
        election."""
        old = self.controller
        if old is None:
            return None
        self.client.delete("/controller")
        self.controller, self.last_controller = None, old
        self.expect.condition("no_active_controller", "controller", bool(self.registered))
        self.expect.step(f"controller {old} resigned")
        self.expect.event(EventType.CONTROLLER_RESIGNED, "/controller", broker_id=old)
        return old

    def failover_controller(self) -> None:
        old = self.resign_controller()
        candidates = sorted(b for b in self.registered if b != old) or sorted(self.registered)
        if not candidates:
            raise SimulateError("no live broker can become controller")
        self.elect_controller(candidates[0])

    # -- partition state writes ---------------------------------------------------------------
    def write_states(
        self, changes: Mapping[Key, PartitionState], as_controller: bool = True, wait: bool = True
    ) -> None:
        """Each change as Kafka's controller writes it: a multi of a check on /controller_epoch's
        version and a setData with the partition epoch (znode version) as expected version.
        `as_controller=False` writes without the check, as a zombie controller could before Kafka
        2.2 fenced writes with that check. `wait=False` leaves the writes in flight (one session
        keeps them in order); a failure then surfaces at the next write or flush."""
        touched: set[int] = set()
        for key, new in changes.items():
            old, version = self._states[key]
            data = formats.partition_state(
                new.leader, new.leader_epoch, new.isr, new.controller_epoch
            )
            set_op = SetData(state_path(*key), data, version)
            ops: list[Op] = [Check("/controller_epoch", self._epoch_version), set_op]
            self.writer.submit(ops if as_controller else [set_op])
            self._states[key] = (new, version + 1)
            self._count_preferred(key, old, -1)
            touched.add(self._count_preferred(key, new, +1))
            self._expect_state_change(key, old, new)
        if wait:
            self.writer.flush()
        self._expect_imbalance(touched)

    def _expect_state_change(self, key: Key, old: PartitionState, new: PartitionState) -> None:
        path = state_path(*key)
        entity = f"{key[0]}/{key[1]}"
        if new.leader != old.leader:
            clean = new.leader == logic.NO_LEADER or new.leader in old.isr
            self.expect.event(EventType.LEADER_CHANGED, path, leader_after=new.leader, clean=clean)
            if not clean:
                self.expect.instant("unclean_leader_election", entity)
        elif new.leader_epoch != old.leader_epoch:
            self.expect.event(
                EventType.LEADER_EPOCH_BUMPED, path, leader_epoch_after=new.leader_epoch
            )
        if new.leader_epoch < old.leader_epoch:
            self.expect.instant("leader_epoch_regression", entity)
        removed = tuple(b for b in old.isr if b not in new.isr)
        added = tuple(b for b in new.isr if b not in old.isr)
        if removed:
            self.expect.event(EventType.ISR_SHRUNK, path, removed=removed)
        if added:
            self.expect.event(EventType.ISR_EXPANDED, path, added=added)
        moved = new.leader != old.leader or new.leader_epoch != old.leader_epoch
        if not (moved or removed or added) and new.controller_epoch != old.controller_epoch:
            self.expect.event(
                EventType.PARTITION_STATE_REWRITTEN, path, controller_epoch=new.controller_epoch
            )
        if new.leader == logic.NO_LEADER and old.leader != logic.NO_LEADER:
            self.expect.event(EventType.PARTITION_OFFLINE, path)
        online = new.leader != logic.NO_LEADER
        self.expect.condition("offline_partition", entity, not online)
        self.expect.condition(
            "under_replicated", entity, online and len(new.isr) < len(self.replicas(key))
        )
        self._expect_min_insync(key, new)

    def broker_failure(self, broker: int) -> None:
        """The broker dies, a new controller is elected if it was the controller, and the
        controller moves leadership and shrinks ISRs for every partition the broker hosted."""
        was_controller = self.controller == broker
        self.kill_broker(broker)
        if was_controller:
            self.elect_controller(min(self.registered))
        hosted = self.hosted_by(broker)
        current = self.states(hosted)
        changes = {}
        for key in hosted:
            new = logic.after_broker_failure(
                self.replicas(key), current[key], broker, self.live, self.controller_epoch
            )
            if new is not None:
                changes[key] = new
        self.write_states(changes)
        self.expect.step(f"controller rewrote {len(changes)} partition states for broker {broker}")

    def broker_return(self, broker: int) -> None:
        self.register_broker(broker)
        hosted = self.hosted_by(broker)
        current = self.states(hosted)
        first: dict[Key, PartitionState] = {}
        second: dict[Key, PartitionState] = {}
        for key in hosted:
            writes = logic.after_broker_return(
                self.replicas(key), current[key], broker, self.controller_epoch
            )
            for target, new in zip((first, second), writes, strict=False):
                target[key] = new
        self.write_states(first)
        self.write_states(second)
        n = len(first) + len(second)
        self.expect.step(f"{n} partition state writes as broker {broker} caught up")

    # -- plain writes scenarios need ------------------------------------------------------------
    def run(self, ops: Sequence[Op]) -> list[object]:
        return self.writer.run(ops)

    def delete_tree(self, path: str) -> None:
        tree_walk.remove(self.writer, self.client, path)

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        """Ends every session this process holds: its brokers and consumers go down."""
        for closer in self._closers:
            closer()
        for session in self.sessions.values():
            close(session)
        self.sessions.clear()
