"""The metadata image follows Kafka's replay rules, and renders as the tree ZooKeeper-mode Kafka
wrote (so the decoders and alert rules read it unchanged)."""

from __future__ import annotations

import json
from typing import Any

from zkcdc.capture.kraft.metadata_image import MetadataImage
from zkcdc.capture.kraft.metadata_records import ControlRecord, MetadataRecord
from zkcdc.capture.kraft.zk_tree import render, whole_tree

TOPIC_ID = "Slp-JZn-SZaFS7LGozNVYQ"
_offset = iter(range(10_000))


def rec(name: str, epoch: int = 3, **fields: Any) -> MetadataRecord:
    return MetadataRecord(next(_offset), epoch, 1_700_000_000_000, 0, 0, name, fields)


def register(broker: int, fenced: bool = True) -> MetadataRecord:
    return rec(
        "RegisterBrokerRecord", BrokerId=broker, BrokerEpoch=100 + broker,
        IncarnationId="A" * 22, IsMigratingZkBroker=False, Rack=None, Fenced=fenced,
        InControlledShutdown=False,
        EndPoints=[{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 9091 + broker,
                    "SecurityProtocol": 0}],
    )  # fmt: skip


def change(**fields: Any) -> MetadataRecord:
    base = {"PartitionId": 0, "TopicId": TOPIC_ID, "Isr": None, "Leader": -2, "Replicas": None,
            "RemovingReplicas": None, "AddingReplicas": None, "LeaderRecoveryState": -1,
            "EligibleLeaderReplicas": None, "LastKnownElr": None}  # fmt: skip
    return rec("PartitionChangeRecord", **{**base, **fields})


def image_with_topic() -> MetadataImage:
    image = MetadataImage()
    for b in (1, 2, 3):
        image.apply(register(b, fenced=False))
    image.apply(rec("TopicRecord", Name="orders", TopicId=TOPIC_ID))
    image.apply(rec(
        "PartitionRecord", PartitionId=0, TopicId=TOPIC_ID, Replicas=[1, 2, 3], Isr=[1, 2, 3],
        RemovingReplicas=[], AddingReplicas=[], Leader=1, LeaderRecoveryState=0, LeaderEpoch=0,
        PartitionEpoch=0, EligibleLeaderReplicas=None, LastKnownElr=None,
    ))  # fmt: skip
    return image


def state(image: MetadataImage) -> dict[str, Any]:
    data = whole_tree(image)["/brokers/topics/orders/partitions/0/state"]
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def test_an_isr_change_alone_keeps_the_leader_epoch_and_bumps_the_partition_epoch() -> None:
    image = image_with_topic()
    image.apply(change(Isr=[1, 3], epoch=7))
    assert state(image) == {"controller_epoch": 7, "leader": 1, "version": 1,
                            "leader_epoch": 0, "isr": [1, 3]}  # fmt: skip
    assert image.partitions[TOPIC_ID][0].partition_epoch == 1


def test_a_leader_written_bumps_the_leader_epoch_even_when_it_is_the_same_leader() -> None:
    image = image_with_topic()
    image.apply(change(Leader=2, Isr=[2, 3]))
    image.apply(change(Leader=2))  # KRaft's bump on an ISR shrink writes the leader again
    assert (state(image)["leader"], state(image)["leader_epoch"]) == (2, 2)
    assert image.partitions[TOPIC_ID][0].partition_epoch == 2


def test_a_fenced_broker_has_no_registration_znode_and_is_back_when_unfenced() -> None:
    image = image_with_topic()
    changed = image.apply(rec("BrokerRegistrationChangeRecord", BrokerId=2, BrokerEpoch=102,
                              Fenced=0, InControlledShutdown=1))  # fmt: skip
    assert dict(render(image, changed.pop()))["/brokers/ids/2"] is not None
    image.apply(rec("FenceBrokerRecord", Id=2, Epoch=102))
    tree = whole_tree(image)
    assert "/brokers/ids/2" not in tree
    assert json.loads(tree["/kraft/brokers/2"])["fenced"] is True
    image.apply(rec("UnfenceBrokerRecord", Id=2, Epoch=102))
    assert "/brokers/ids/2" in whole_tree(image)


def test_records_of_a_transaction_take_effect_at_its_end_and_never_after_an_abort() -> None:
    image = image_with_topic()
    assert image.apply(rec("BeginTransactionRecord", Name="x")) == set()
    assert image.apply(change(Isr=[1])) == set()
    assert state(image)["isr"] == [1, 2, 3]
    assert image.apply(rec("EndTransactionRecord")) == {("partition", "orders", 0)}
    assert state(image)["isr"] == [1]
    image.apply(rec("BeginTransactionRecord", Name="y"))
    image.apply(change(Isr=[1, 2]))
    image.apply(rec("AbortTransactionRecord", Reason="controller failed over"))
    assert state(image)["isr"] == [1]


def test_removing_a_topic_removes_its_partitions_and_configs() -> None:
    image = image_with_topic()
    image.apply(rec("ConfigRecord", ResourceType=2, ResourceName="orders", Name="retention.ms",
                    Value="1000"))  # fmt: skip
    assert json.loads(whole_tree(image)["/config/topics/orders"])["config"] == {
        "retention.ms": "1000"
    }
    changed = image.apply(rec("RemoveTopicRecord", TopicId=TOPIC_ID))
    rendered = dict(change for key in changed for change in render(image, key))
    assert rendered["/brokers/topics/orders"] is None
    assert rendered["/brokers/topics/orders/partitions/0/state"] is None
    assert rendered["/config/topics/orders"] is None
    assert not any(p.startswith("/brokers/topics/orders") for p in whole_tree(image))


def test_a_config_set_to_null_is_removed_and_the_cluster_default_is_named_default() -> None:
    image = MetadataImage()
    image.apply(rec("ConfigRecord", ResourceType=4, ResourceName="", Name="a", Value="1"))
    assert "/config/brokers/<default>" in whole_tree(image)
    image.apply(rec("ConfigRecord", ResourceType=4, ResourceName="", Name="a", Value=None))
    assert "/config/brokers/<default>" not in whole_tree(image)


def test_the_quorum_leader_is_the_controller_with_the_raft_epoch() -> None:
    image = MetadataImage()
    voters = [{"VoterId": v} for v in (101, 102, 103)]
    image.apply(ControlRecord(0, 5, 1_700_000_000_123, 2, "LeaderChangeMessage",
                              {"LeaderId": 102, "Voters": voters, "GrantingVoters": voters}))  # fmt: skip
    tree = whole_tree(image)
    assert json.loads(tree["/controller"]) == {"version": 2, "brokerid": 102,
                                               "timestamp": "1700000000123",
                                               "kraftControllerEpoch": 5}  # fmt: skip
    assert tree["/controller_epoch"] == b"5"
    assert json.loads(tree["/kraft/quorum"]) == {"leader": 102, "epoch": 5,
                                                 "voters": [101, 102, 103]}  # fmt: skip


def test_a_registration_renders_as_a_zookeeper_mode_broker_registration() -> None:
    image = MetadataImage()
    image.apply(register(1, fenced=False))
    reg = json.loads(whole_tree(image)["/brokers/ids/1"])
    assert reg["version"] == 5 and reg["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert (reg["host"], reg["port"]) == ("127.0.0.1", 9092)


def test_a_take_over_says_no_rewrite_where_the_epochs_alone_differ_and_the_state_moves_on() -> None:
    """ZooKeeper's last tree numbered a state with its controller epoch, KRaft with the Raft
    epoch of the controller that wrote it: the comparison's record says nothing of a rewrite."""
    from zkcdc.capture.kraft.kraft_tracker import KraftTracker
    from zkcdc.capture.records import Znode
    from zkcdc.capture.tracker import TrackerState

    image = image_with_topic()
    path = "/brokers/topics/orders/partitions/0/state"
    kraft = json.loads(whole_tree(image)[path])
    zookeeper = json.dumps({**kraft, "controller_epoch": kraft["controller_epoch"] + 4}).encode()
    state = TrackerState(cluster="c", seq=9, mode="watch",
                         tree={path: Znode(zookeeper, 2, 1, 5, 1, 2, 0)})  # fmt: skip
    records = KraftTracker(state, lambda: 0).load(image, 20, 1_000)
    (compared,) = [r for r in records if r.path == path]
    assert compared.op.value == "UPDATE" and compared.events == ()
    assert json.loads(state.tree[path].data or b"") == kraft
