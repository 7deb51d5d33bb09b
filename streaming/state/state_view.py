"""`zkcdc state show` as tables: one cluster's current view, from the newest value per key of
the state topic (`state_records` keys: cluster/kind/id)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from zkcdc.streaming.errors import StreamingError

LISTED = 50  # partitions listed per table; the rest are counted


def clusters(keys: Iterable[str]) -> list[str]:
    return sorted({key.split("/", 1)[0] for key in keys})


def choose_cluster(keys: Iterable[str], wanted: str | None) -> str:
    return pick_cluster(clusters(keys), wanted, "the state topic")


def pick_cluster(known: list[str], wanted: str | None, holder: str) -> str:
    """The cluster a command is about: `--cluster`, or the only one `holder` has."""
    if wanted is not None:
        if wanted not in known:
            raise StreamingError(
                f"no state of cluster {wanted!r}; known: {', '.join(known) or 'none'}"
            )
        return wanted
    if not known:
        raise StreamingError(f"{holder} holds no cluster yet")
    if len(known) > 1:
        raise StreamingError(f"several clusters ({', '.join(known)}): pick one with --cluster")
    return known[0]


@dataclass
class ClusterView:
    cluster: str
    brokers: list[dict[str, Any]] = field(default_factory=list)
    controller: dict[str, Any] | None = None
    partitions: list[dict[str, Any]] = field(default_factory=list)
    topics: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    listed: int = LISTED

    @classmethod
    def of(
        cls, cluster: str, latest: dict[str, dict[str, Any]], listed: int = LISTED
    ) -> ClusterView:
        view = cls(cluster, listed=listed)
        for key, value in sorted(latest.items()):
            if not key.startswith(f"{cluster}/"):
                continue
            kind = value.get("kind")
            if kind == "broker":
                view.brokers.append(value)
            elif kind == "controller":
                view.controller = value
            elif kind == "partition":
                view.partitions.append(value)
            elif kind == "topic":
                view.topics.append(value)
            elif kind == "group":
                view.groups.append(value)
        view.brokers.sort(key=lambda b: b["broker_id"])
        view.partitions.sort(key=lambda p: (p["topic"], p["partition"]))
        return view

    @property
    def under_replicated(self) -> list[dict[str, Any]]:
        return [p for p in self.partitions if p.get("under_replicated")]

    @property
    def offline(self) -> list[dict[str, Any]]:
        return [p for p in self.partitions if p.get("offline")]

    def summary(self) -> str:
        alive = sum(1 for b in self.brokers if b.get("alive"))
        return (
            f"cluster {self.cluster}: {alive}/{len(self.brokers)} brokers alive, "
            f"{len(self.topics)} topics, {len(self.partitions)} partitions, "
            f"{len(self.under_replicated)} under-replicated, {len(self.offline)} offline"
        )

    def tables(self) -> list[Table]:
        return [
            self._brokers(),
            self._controller(),
            self._partitions("Under-replicated partitions", self.under_replicated),
            self._partitions("Offline partitions", self.offline),
            self._preferred(),
            self._groups(),
        ]

    def _brokers(self) -> Table:
        table = Table("broker", "alive", "endpoints", "epoch (czxid)", title="Brokers")
        for b in self.brokers:
            table.add_row(
                str(b["broker_id"]),
                "yes" if b.get("alive") else "NO",
                ", ".join(b.get("endpoints") or []),
                _text(b.get("epoch")),
            )
        return table

    def _controller(self) -> Table:
        table = Table("broker", "epoch", "previous", title="Controller")
        c = self.controller or {}
        broker = c.get("broker_id")
        table.add_row(
            "none" if broker is None else str(broker),
            _text(c.get("epoch")),
            _text(c.get("last_broker_id")),
        )
        return table

    def _partitions(self, title: str, partitions: list[dict[str, Any]]) -> Table:
        table = Table("partition", "leader", "isr", "replicas", "leader epoch", title=title)
        for p in partitions[: self.listed]:
            table.add_row(
                f"{p['topic']}/{p['partition']}",
                _text(p.get("leader")),
                _ints(p.get("isr")),
                _ints(p.get("replicas")),
                _text(p.get("leader_epoch")),
            )
        if len(partitions) > self.listed:
            table.caption = f"and {len(partitions) - self.listed} more"
        elif not partitions:
            table.caption = "none"
        return table

    def _preferred(self) -> Table:
        table = Table(
            "broker", "preferred for", "leads of those", "share", title="Preferred leaders"
        )
        for b in self.brokers:
            preferred = int(b.get("preferred_partitions") or 0)
            led = preferred - int(b.get("preferred_not_led") or 0)
            share = f"{100 * led / preferred:.0f} %" if preferred else "-"
            table.add_row(str(b["broker_id"]), str(preferred), str(led), share)
        return table

    def _groups(self) -> Table:
        table = Table(
            "group", "members", "owned partitions", "committed offsets", title="Consumer groups"
        )
        for g in sorted(self.groups, key=lambda g: g["group"]):
            table.add_row(
                g["group"],
                str(len(g.get("members") or {})),
                str(len(g.get("owners") or {})),
                str(len(g.get("offsets") or {})),
            )
        if not self.groups:
            table.caption = "none"
        return table


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _ints(values: Any) -> str:
    return ",".join(str(v) for v in values or [])
