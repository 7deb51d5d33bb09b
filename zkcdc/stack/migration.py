"""`zkcdc stack migrate`: a running ZooKeeper-mode stack taken to KRaft by Kafka's documented
steps (Kafka 3.9 "ZooKeeper to KRaft Migration"), one phase at a time, each waited for:

1. controllers: a KRaft controller quorum formatted with the ZooKeeper cluster's id, started
   with `zookeeper.metadata.migration.enable`;
2. dual-write: the brokers rolled with migration enabled and the quorum's address; they
   register with the controllers, which copy the metadata from ZooKeeper (the metadata log's
   ZkMigrationStateRecord says MIGRATION) and from then on write ZooKeeper as well;
3. kraft-brokers: the brokers rolled again as KRaft brokers (`process.roles=broker`);
4. finalized: the controllers rolled without ZooKeeper (the log says POST_MIGRATION).

The phase reached is saved with the stack (a phase that failed runs again), so `migrate --until PHASE` stops part-way (e.g. to
hand a capture over) and a later `migrate` goes on from there. ZooKeeper is left running (its
tree stays readable) until `stack down`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from zkcdc.capture.kraft.metadata_dir import load_image
from zkcdc.ground.private_files import atomic_write
from zkcdc.stack import configs, probes
from zkcdc.stack.cluster import LocalStack
from zkcdc.stack.errors import StackError
from zkcdc.stack.layout import StackLayout

PHASES = ("controllers", "dual-write", "kraft-brokers", "finalized")
_MIGRATION, _POST_MIGRATION = 1, 3  # ZkMigrationState in the metadata log


class StackMigration:
    def __init__(self, stack: LocalStack, announce: Callable[[str], None]) -> None:
        self.stack = stack
        self._announce = announce

    def run(self, until: str = "finalized", controllers: int | None = None,
            controller_port: int | None = None) -> str:  # fmt: skip
        """Runs the phases after the one saved, up to `until`; returns the phase reached."""
        stack, s = self.stack, self.stack.settings
        if s.mode == "kraft":
            raise StackError("the stack runs in KRaft mode already: nothing to migrate")
        if s.secure:
            raise StackError("a --secure stack cannot be migrated by zkcdc (plaintext only)")
        alive = stack.running()
        if not alive or not all(alive.values()):
            raise StackError(f"stack in {stack.layout.state_dir} is not (all) running")
        completed = self._completed()
        done = PHASES.index(completed) + 1 if completed else 0
        wanted = PHASES.index(until) + 1
        if done >= wanted:
            self._announce(f"migration already at {completed}")
            return completed
        changes: dict[str, object] = {}
        if controllers is not None:
            changes["controllers"] = controllers
        if controller_port is not None:
            changes["controller_port"] = controller_port
        if changes and s.migration:
            raise StackError("--controllers/--controller-port only before the migration starts")
        steps = {
            "controllers": self._controllers,
            "dual-write": self._dual_write,
            "kraft-brokers": self._kraft_brokers,
            "finalized": self._finalize,
        }
        for phase in PHASES[done:wanted]:
            self._announce(f"migration: {phase} ...")
            self._set(phase, **changes)
            changes = {}
            steps[phase]()
            atomic_write(self._done_file, phase)
            self._announce(f"migration: {phase} done")
        return until

    @property
    def _done_file(self) -> Path:
        return self.stack.layout.state_dir / "migration-done"

    def _completed(self) -> str:
        try:
            return self._done_file.read_text().strip()
        except FileNotFoundError:
            return ""

    # ---- the phases ---------------------------------------------------------------------
    def _controllers(self) -> None:
        stack = self.stack
        layout = stack.layout
        running = stack.running()
        if any(running.get(c.name) for c in layout.controllers):
            stack._wait_for_quorum()  # started by a run that failed later: go on
            return
        for c in layout.controllers:
            if not probes.port_is_free(layout.host, c.port):
                raise StackError(f"port {c.port} ({c.name}) is in use: choose --controller-port")
        cluster_id = self._zookeeper_cluster_id()
        log4j = configs.log4j_config(stack.settings.log_levels)
        for c in layout.controllers:
            c.log_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(c.config_file, configs.controller_config(layout, c, stack.settings))
            (c.home / "log4j.properties").write_text(log4j)
        stack.format_kraft_storage(cluster_id, [c.home for c in layout.controllers])
        for c in layout.controllers:
            stack._start(c.name)
        stack._wait_for_quorum()

    def _dual_write(self) -> None:
        self._roll_brokers()
        self._wait_for_migration_state(_MIGRATION, "the metadata copied from ZooKeeper")

    def _kraft_brokers(self) -> None:
        self._roll_brokers()

    def _finalize(self) -> None:
        stack = self.stack
        for c in stack.layout.controllers:
            atomic_write(c.config_file, configs.controller_config(stack.layout, c, stack.settings))
            stack.stop_controller(c.name)
            stack._start(c.name)
            stack._wait_for_quorum()
        self._wait_for_migration_state(_POST_MIGRATION, "the migration finalized")

    # ---- steps --------------------------------------------------------------------------
    def _set(self, phase: str, **changes: object) -> None:
        stack = self.stack
        stack.settings = stack.settings.model_copy(update={"migration": phase, **changes})
        stack.layout = StackLayout.from_settings(stack.settings)
        stack._save()

    def _roll_brokers(self) -> None:
        """Each broker in turn: new config, controlled shutdown, start, back and in sync."""
        stack = self.stack
        for broker in stack.layout.brokers:
            config = configs.broker_config(stack.layout, broker, stack.settings)
            atomic_write(broker.config_file, config, mode=0o600)
            stack.stop_broker(broker.broker_id)
            stack.start_broker(broker.broker_id)
            self._wait_in_sync()
            self._announce(f"  broker {broker.broker_id} rolled")

    def _wait_in_sync(self) -> None:
        """Until every partition has its whole replica set in sync (a roll takes one broker
        at a time out, never two)."""
        stack = self.stack
        admin = stack.kafka().admin()
        deadline = stack._deadline()
        while True:
            try:
                metadata = admin.list_topics(timeout=5.0)
                lagging = [
                    f"{t.topic}-{p.id}"
                    for t in metadata.topics.values()
                    for p in t.partitions.values()
                    if set(p.isrs) != set(p.replicas)
                ]
            except Exception as exc:  # the client's errors: not answering yet
                lagging = [str(exc)]
            if not lagging:
                return
            if stack._now() > deadline:
                raise StackError(f"partitions not back in sync: {', '.join(lagging[:5])}")
            stack._sleep(0.5)

    def _zookeeper_cluster_id(self) -> str:
        stack = self.stack
        hosts = stack.layout.zookeeper_hosts
        with probes.zookeeper_client(hosts, stack.zookeeper_access()) as zk:
            data, _ = zk.get(f"{stack.layout.chroot}/cluster/id")
        try:
            return str(json.loads(data)["id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StackError(f"unreadable {stack.layout.chroot}/cluster/id: {data[:80]!r}") from exc

    def _wait_for_migration_state(self, state: int, what: str) -> None:
        """Until the active controller's metadata log holds ZkMigrationState `state`."""
        stack = self.stack
        deadline = stack._deadline()
        while True:
            leader = stack.quorum_leader()
            chosen = [c for c in stack.layout.controllers if leader and c.node_id == leader[0]]
            if chosen:
                image = load_image(chosen[0].metadata_dir).image
                if image.migration_state == state:
                    return
            stack._fail_if_exited(list(stack.records()))
            if stack._now() > deadline:
                names = [c.name for c in stack.layout.controllers]
                raise stack._not_up(names[0], f"{what}: not within the timeout")
            stack._sleep(0.5)
