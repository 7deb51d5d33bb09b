"""The KRaft metadata image as the tree Kafka kept in ZooKeeper: the same paths and JSON, so
every decoder, event and alert rule downstream works on a KRaft cluster unchanged.

- `/brokers/ids/N` exists while broker N is registered and **not fenced**: a fenced broker
  cannot lead or serve, as a ZooKeeper-mode broker without its znode; its registration's
  epoch is the offset of its `RegisterBrokerRecord`, as Kafka's broker epoch.
- `/brokers/topics/T` (v3, with `topic_id`, adding and removing replicas) and
  `.../partitions/P/state` (v1; `controller_epoch` is the Raft epoch of the controller that
  wrote the change; `eligible_leader_replicas` and `last_known_elr` when KRaft keeps them).
- `/config/topics/T` (every topic's, empty without overrides), `/config/brokers/N` (and
  `<default>`): `{"version":1,"config":{...}}`.
- `/controller` (v2, `kraftControllerEpoch`) and `/controller_epoch`: the quorum's leader and
  its epoch.

What only KRaft has goes under `/kraft`, a subtree ZooKeeper never had: `/kraft/brokers/N`
(every registration, with `fenced` and `in_controlled_shutdown`), `/kraft/controllers/N`,
`/kraft/features/NAME`, `/kraft/quorum` and `/kraft/migration`."""

from __future__ import annotations

import re

import orjson

from zkcdc.capture.kraft.metadata_image import BROKER, TOPIC, Key, MetadataImage

PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION",
                    4: "ZK"}  # fmt: skip

# Znodes that are always there in a Kafka tree, parents of what the image renders.
PARENTS = ("/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics",
           "/config/brokers", "/kraft", "/kraft/brokers", "/kraft/controllers",
           "/kraft/features")  # fmt: skip

Change = tuple[str, bytes | None]  # a path and its data after the change (None: gone)


def _json(value: object) -> bytes:
    return orjson.dumps(value)


def broker_registration(image: MetadataImage, broker_id: int) -> bytes | None:
    """`/brokers/ids/N` as a ZooKeeper-mode broker writes it (v5), for a live, unfenced one."""
    reg = image.brokers.get(broker_id)
    if reg is None or reg.fenced:
        return None
    protocols = {name: PROTOCOLS.get(p, str(p)) for name, _, _, p in reg.endpoints}
    plaintext = [(h, port) for name, h, port, p in reg.endpoints if p == 0]
    host, port = plaintext[0] if plaintext else (None, -1)
    value: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": protocols,
        "endpoints": [f"{name}://{h}:{port_}" for name, h, port_, _ in reg.endpoints],
        "jmx_port": -1,
        "port": port,
        "host": host,
        "version": 5,
        "timestamp": str(reg.registered_ms),
    }
    if reg.rack is not None:
        value["rack"] = reg.rack
    return _json(value)


def kraft_broker(image: MetadataImage, broker_id: int) -> bytes | None:
    reg = image.brokers.get(broker_id)
    if reg is None:
        return None
    return _json({
        "broker_id": reg.broker_id,
        "broker_epoch": reg.epoch,
        "incarnation_id": reg.incarnation_id,
        "fenced": reg.fenced,
        "in_controlled_shutdown": reg.in_controlled_shutdown,
        "endpoints": [f"{name}://{h}:{port}" for name, h, port, _ in reg.endpoints],
        "rack": reg.rack,
        "migrating_zk_broker": reg.migrating_zk_broker,
    })  # fmt: skip


def topic_assignment(image: MetadataImage, name: str) -> bytes | None:
    topic_id = image.topic_ids.get(name)
    if topic_id is None:
        return None
    parts = image.partitions[topic_id]
    return _json({
        "partitions": {str(p): list(parts[p].replicas) for p in sorted(parts)},
        "topic_id": topic_id,
        "adding_replicas": {str(p): list(parts[p].adding) for p in sorted(parts) if parts[p].adding},
        "removing_replicas": {str(p): list(parts[p].removing) for p in sorted(parts)
                              if parts[p].removing},
        "version": 3,
    })  # fmt: skip


def partition_state(image: MetadataImage, name: str, partition: int) -> bytes | None:
    topic_id = image.topic_ids.get(name)
    known = None if topic_id is None else image.partitions[topic_id].get(partition)
    if known is None:
        return None
    value: dict[str, object] = {
        "controller_epoch": known.controller_epoch + image.epoch_base,
        "leader": known.leader,
        "version": 1,
        "leader_epoch": known.leader_epoch,
        "isr": list(known.isr),
    }
    if known.leader_recovery_state == 1:
        value["leader_recovery_state"] = 1
    if known.elr is not None:
        value["eligible_leader_replicas"] = list(known.elr)
    if known.last_known_elr is not None:
        value["last_known_elr"] = list(known.last_known_elr)
    return _json(value)


def config(image: MetadataImage, kind: int, resource: str) -> bytes | None:
    """`/config/...`: a topic's is there as long as the topic (empty without overrides), as
    ZooKeeper-mode Kafka creates it with the topic; a broker's while it has overrides."""
    values = image.configs.get((kind, resource))
    if values is None and kind == TOPIC and resource in image.topic_ids:
        values = {}
    if values is None:
        return None
    return _json({"version": 1, "config": dict(sorted(values.items()))})


def config_path(kind: int, resource: str) -> str:
    if kind == TOPIC:
        return f"/config/topics/{resource}"
    assert kind == BROKER
    return f"/config/brokers/{resource or '<default>'}"


def render(image: MetadataImage, key: Key) -> list[Change]:
    """The znodes a changed key stands for, with their data now (parents before children)."""
    kind = key[0]
    if kind == "broker":
        b = key[1]
        return [
            (f"/brokers/ids/{b}", broker_registration(image, b)),
            (f"/kraft/brokers/{b}", kraft_broker(image, b)),
        ]
    if kind == "topic":
        name = key[1]
        data = topic_assignment(image, name)
        return [
            (f"/brokers/topics/{name}", data),
            (f"/brokers/topics/{name}/partitions", None if data is None else b""),
            (config_path(TOPIC, name), config(image, TOPIC, name)),
        ]
    if kind == "partition":
        name, p = key[1], key[2]
        state = partition_state(image, name, p)
        return [
            (f"/brokers/topics/{name}/partitions/{p}", None if state is None else b""),
            (f"/brokers/topics/{name}/partitions/{p}/state", state),
        ]
    if kind == "config":
        return [(config_path(key[1], key[2]), config(image, key[1], key[2]))]
    if kind == "controller":
        q = image.quorum
        epoch = _json(q.epoch + image.epoch_base)
        if q.leader < 0:
            return [("/controller", None), ("/controller_epoch", epoch)]
        controller = {"version": 2, "brokerid": q.leader, "timestamp": str(q.since_ms),
                      "kraftControllerEpoch": q.epoch}  # fmt: skip
        return [("/controller", _json(controller)), ("/controller_epoch", epoch)]
    if kind == "quorum":
        q = image.quorum
        quorum = {"leader": q.leader, "epoch": q.epoch, "voters": list(q.voters)}
        return [("/kraft/quorum", _json(quorum))]
    if kind == "feature":
        level = image.features.get(key[1])
        return [(f"/kraft/features/{key[1]}", None if level is None else _json(level))]
    if kind == "migration":
        phase = image.migration_state
        value = None if phase is None else {"state": MIGRATION_STATES.get(phase, str(phase))}
        return [("/kraft/migration", None if value is None else _json(value))]
    if kind == "controller_registration":
        fields = image.controllers.get(key[1])
        if fields is None:
            return [(f"/kraft/controllers/{key[1]}", None)]
        registration: dict[str, object] = {
            "controller_id": key[1],
            "incarnation_id": fields["IncarnationId"],
            "zk_migration_ready": fields["ZkMigrationReady"],
            "endpoints": [f"{e['Name']}://{e['Host']}:{e['Port']}" for e in fields["EndPoints"]],
        }
        return [(f"/kraft/controllers/{key[1]}", _json(registration))]
    raise ValueError(f"no znode for {key!r}")


_RENDERED = re.compile(
    r"/(brokers(/ids(/\d+)?|/topics(/[^/]+(/partitions(/\d+(/state)?)?)?)?)?"
    r"|config(/topics(/[^/]+)?|/brokers(/[^/]+)?)?|controller|controller_epoch|kraft(/.*)?)"
)


def rendered(path: str) -> bool:
    """Whether a path is one the image renders: the rest of a ZooKeeper tree (`/consumers`,
    `/admin`, `/migration`, ...) is not in KRaft's metadata."""
    return _RENDERED.fullmatch(path) is not None


def whole_tree(image: MetadataImage) -> dict[str, bytes]:
    """Every znode of the image: what a snapshot of it reads as."""
    keys: list[Key] = [("controller",), ("quorum",)]
    keys += [("broker", b) for b in image.brokers]
    keys += [("controller_registration", c) for c in image.controllers]
    for topic_id, name in image.topic_names.items():
        keys.append(("topic", name))
        keys += [("partition", name, p) for p in image.partitions[topic_id]]
    keys += [("config", kind, resource) for kind, resource in image.configs]
    keys += [("feature", name) for name in image.features]
    keys.append(("migration",))
    tree = {path: b"" for path in PARENTS}
    for key in keys:
        for path, data in render(image, key):
            if data is not None:
                tree[path] = data
    return tree
