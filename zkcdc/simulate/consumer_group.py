"""A legacy (pre-2.0, ZooKeeper-based) consumer group on a simulated cluster: each consumer a
session of its own, registered under `/consumers/G/ids`, owning partitions under `owners` by
the range rebalance, committing offsets under `offsets` — the seed documents' formats."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from zkcdc.ground.change_types import EventType
from zkcdc.simulate import formats
from zkcdc.simulate.cluster import SimulatedCluster
from zkcdc.simulate.zk_writer import Create, Delete, SetData, close, connect, run_multi
from zkcdc.streaming.rules.range_assignment import assign, thread_ids


@dataclass
class ConsumerGroup:
    cluster: SimulatedCluster
    group: str
    topic: str
    sessions: dict[str, KazooClient] = field(default_factory=dict)
    owners: dict[int, str] = field(default_factory=dict)  # partition -> thread id
    offsets: dict[int, int] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"/consumers/{self.group}"

    def join(self, count: int) -> list[str]:
        """`count` consumers of one thread each register; ids as the old client made them."""
        cluster = self.cluster
        for path in (
            "",
            "/ids",
            "/owners",
            f"/owners/{self.topic}",
            "/offsets",
            f"/offsets/{self.topic}",
        ):
            cluster.client.ensure_path(self.base + path)
        joined = []
        for i in range(count):
            consumer = f"{self.group}_sim-host-{i}-{cluster.now_ms()}-{uuid.uuid4().hex[:8]}"
            session = connect(cluster.hosts)
            data = formats.consumer_registration({self.topic: 1}, cluster.now_ms())
            session.create(f"{self.base}/ids/{consumer}", data, ephemeral=True)
            self.sessions[consumer] = session
            cluster.expect.event(
                EventType.CONSUMER_REGISTERED,
                f"{self.base}/ids/{consumer}",
                group=self.group,
                consumer_id=consumer,
            )
            joined.append(consumer)
        cluster.expect.step(f"{count} consumers joined group {self.group} on {self.topic}")
        self._expect_conditions()
        return joined

    def rebalance(self) -> None:
        """Every consumer releases what it owns, then claims its range (ephemeral owner
        znodes from the claiming consumer's session), as the old client's rebalance did."""
        cluster = self.cluster
        for partition in sorted(self.owners):
            cluster.run([Delete(self._owner_path(partition))])
        before = dict(self.owners)
        self.owners.clear()
        partitions = sorted(cluster.topics[self.topic].replicas)
        threads = thread_ids({c: 1 for c in self.sessions})
        for thread, owned in assign(partitions, threads).items():
            session = self.sessions[thread.rsplit("-", 1)[0]]
            ops = [
                Create(self._owner_path(p), formats.consumer_owner(thread), ephemeral=True)
                for p in owned
            ]
            if ops:
                run_multi(session, ops)
            for p in owned:
                self.owners[p] = thread
                if before.get(p) != thread:
                    cluster.expect.event(
                        EventType.PARTITION_OWNER_CHANGED,
                        self._owner_path(p),
                        group=self.group,
                        owner_after=thread,
                    )
        cluster.expect.step(
            f"group {self.group} rebalanced: {len(self.sessions)} consumers, "
            f"{len(self.owners)} partitions owned"
        )
        self._expect_conditions()

    def commit(self, partition: int, offset: int) -> None:
        path = f"{self.base}/offsets/{self.topic}/{partition}"
        data = formats.consumer_offset(offset)
        if self.cluster.client.exists(path):
            previous = int(self.cluster.client.get(path)[0])
            self.cluster.run([SetData(path, data)])
            if offset < previous:
                self.cluster.expect.instant("offset_regression", f"group/{self.group}")
        else:
            self.cluster.run([Create(path, data)])
        self.cluster.expect.event(
            EventType.OFFSET_COMMITTED,
            path,
            group=self.group,
            partition=partition,
            offset_after=offset,
        )
        self.offsets[partition] = offset

    def claim(self, partition: int, thread: str, pause: Callable[[], None] = lambda: None) -> None:
        """`thread` takes `partition` over against the range assignment (its owner released it,
        a consumer with a stale view of the group claimed it)."""
        cluster, path = self.cluster, self._owner_path(partition)
        cluster.run([Delete(path)])
        cluster.expect.event(
            EventType.PARTITION_OWNER_CHANGED, path, group=self.group, owner_after=None
        )
        pause()  # the release seen before the claim
        session = self.sessions[thread.rsplit("-", 1)[0]]
        session.create(path, formats.consumer_owner(thread), ephemeral=True)
        self.owners[partition] = thread
        cluster.expect.event(
            EventType.PARTITION_OWNER_CHANGED, path, group=self.group, owner_after=thread
        )
        cluster.expect.step(f"{thread} claimed partition {partition} of {self.topic}")
        self._expect_conditions()

    def leave(self, consumer: str) -> None:
        """The consumer's session closes: its registration and owner znodes go with it."""
        close(self.sessions.pop(consumer))
        cluster = self.cluster
        cluster.expect.event(
            EventType.CONSUMER_DEREGISTERED,
            f"{self.base}/ids/{consumer}",
            group=self.group,
            consumer_id=consumer,
        )
        for partition, thread in list(self.owners.items()):
            if thread.rsplit("-", 1)[0] == consumer:
                del self.owners[partition]
                cluster.expect.event(
                    EventType.PARTITION_OWNER_CHANGED,
                    self._owner_path(partition),
                    True,
                    group=self.group,
                    owner_after=None,
                )
        cluster.expect.step(f"consumer {consumer} left group {self.group}")
        self._expect_conditions()

    def _expect_conditions(self) -> None:
        """The consumer rules' view: the range assignment of the current members against the
        owners as they are."""
        partitions = sorted(self.cluster.topics[self.topic].replicas)
        threads = thread_ids({c: 1 for c in self.sessions})
        expected = {p: t for t, owned in assign(partitions, threads).items() for p in owned}
        busy = {t.rsplit("-", 1)[0] for t in expected.values()}
        members = bool(self.sessions)
        entity = f"group/{self.group}"
        expect = self.cluster.expect
        expect.condition(
            "consumer_partition_unowned",
            entity,
            members and any(p not in self.owners for p in expected),
        )
        expect.condition("consumer_idle", entity, members and bool(set(self.sessions) - busy))
        expect.condition(
            "consumer_owner_mismatch",
            entity,
            any(p in expected and expected[p] != t for p, t in self.owners.items()),
        )

    def _owner_path(self, partition: int) -> str:
        return f"{self.base}/owners/{self.topic}/{partition}"

    def close(self) -> None:
        for session in self.sessions.values():
            close(session)
        self.sessions.clear()
