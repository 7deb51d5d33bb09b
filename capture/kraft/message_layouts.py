"""The layouts of the KRaft metadata log's messages, per version: what Kafka's message specs
(`metadata/src/main/resources/common/metadata/*.json`, and the Raft control messages in
`clients/.../common/message/`) say, written down in a compact form of our own.

A field (`f(...)`) has a name, a type (`int8 int16 uint16 int32 int64 float64 bool uuid string
bytes`, `[]T` of those, a `Struct` or a `StructArray`), the versions that have it, the first
version where it may be null, its tag if it is a tagged field, and its default (what it reads
as where absent: a tagged field not written, a version without it).

Every metadata message is "flexible" from version 0 (compact strings and arrays, tagged fields).
A layout reaches up to the newest version Kafka 3.9 and 4.x (up to 4.3) write; a newer version
is named as unknown, never guessed. `tests/integration/kraft/test_message_layouts.py` compares
them with the schemas compiled into Kafka's own jars."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Struct:
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class StructArray:
    fields: tuple[Field, ...]


FieldType = str | Struct | StructArray


class _TypeDefault:
    """The type's zero (0, false, "", [], the zero uuid): what an absent field reads as
    unless the spec names another default."""


TYPE_DEFAULT = _TypeDefault()


@dataclass(frozen=True)
class Field:
    name: str
    kind: FieldType
    since: int
    until: int | None
    nullable_from: int | None
    tag: int | None
    default: object

    def present_in(self, version: int) -> bool:
        return self.since <= version and (self.until is None or version <= self.until)

    def nullable_in(self, version: int) -> bool:
        return self.nullable_from is not None and version >= self.nullable_from


def f(
    name: str,
    kind: FieldType,
    since: int = 0,
    *,
    until: int | None = None,
    nullable: int | None = None,
    tag: int | None = None,
    default: object = TYPE_DEFAULT,
) -> Field:
    return Field(name, kind, since, until, nullable, tag, default)


@dataclass(frozen=True)
class MessageLayout:
    name: str
    versions: tuple[int, int]
    fields: tuple[Field, ...]


_ENDPOINT = (f("Name", "string"), f("Host", "string"), f("Port", "uint16"),
             f("SecurityProtocol", "int16"))  # fmt: skip
_FEATURE = (f("Name", "string"), f("MinSupportedVersion", "int16"),
            f("MaxSupportedVersion", "int16"))  # fmt: skip

# apiKey -> layout (the metadata records: a record value's frame names the key and version).
METADATA: dict[int, MessageLayout] = {
    0: MessageLayout("RegisterBrokerRecord", (0, 4), (
        f("BrokerId", "int32"),
        f("IsMigratingZkBroker", "bool", 2),
        f("IncarnationId", "uuid"),
        f("BrokerEpoch", "int64"),
        f("EndPoints", StructArray(_ENDPOINT)),
        f("Features", StructArray(_FEATURE)),
        f("Rack", "string", nullable=0),
        f("Fenced", "bool", default=True),
        f("InControlledShutdown", "bool", 1),
        f("LogDirs", "[]uuid", 3, tag=0),
        f("CordonedLogDirs", "[]uuid", 4, nullable=4, tag=1, default=None),  # Kafka 4.x
    )),
    1: MessageLayout("UnregisterBrokerRecord", (0, 0), (
        f("BrokerId", "int32"), f("BrokerEpoch", "int64"),
    )),
    2: MessageLayout("TopicRecord", (0, 0), (f("Name", "string"), f("TopicId", "uuid"))),
    3: MessageLayout("PartitionRecord", (0, 2), (
        f("PartitionId", "int32"),
        f("TopicId", "uuid"),
        f("Replicas", "[]int32"),
        f("Isr", "[]int32"),
        f("RemovingReplicas", "[]int32"),
        f("AddingReplicas", "[]int32"),
        f("Leader", "int32", default=-1),
        f("LeaderRecoveryState", "int8", tag=0),
        f("LeaderEpoch", "int32", default=-1),
        f("PartitionEpoch", "int32", default=-1),
        f("Directories", "[]uuid", 1),
        f("EligibleLeaderReplicas", "[]int32", 2, nullable=2, tag=1, default=None),
        f("LastKnownElr", "[]int32", 2, nullable=2, tag=2, default=None),
    )),
    4: MessageLayout("ConfigRecord", (0, 0), (
        f("ResourceType", "int8"), f("ResourceName", "string"), f("Name", "string"),
        f("Value", "string", nullable=0),
    )),
    5: MessageLayout("PartitionChangeRecord", (0, 2), (
        f("PartitionId", "int32"),
        f("TopicId", "uuid"),
        f("Isr", "[]int32", nullable=0, tag=0, default=None),
        f("Leader", "int32", tag=1, default=-2),
        f("Replicas", "[]int32", nullable=0, tag=2, default=None),
        f("RemovingReplicas", "[]int32", nullable=0, tag=3, default=None),
        f("AddingReplicas", "[]int32", nullable=0, tag=4, default=None),
        f("LeaderRecoveryState", "int8", tag=5, default=-1),
        f("Directories", "[]uuid", 1, nullable=1, tag=8, default=None),
        f("EligibleLeaderReplicas", "[]int32", 2, nullable=2, tag=6, default=None),
        f("LastKnownElr", "[]int32", 2, nullable=2, tag=7, default=None),
    )),
    7: MessageLayout("FenceBrokerRecord", (0, 0), (f("Id", "int32"), f("Epoch", "int64"))),
    8: MessageLayout("UnfenceBrokerRecord", (0, 0), (f("Id", "int32"), f("Epoch", "int64"))),
    9: MessageLayout("RemoveTopicRecord", (0, 0), (f("TopicId", "uuid"),)),
    10: MessageLayout("DelegationTokenRecord", (0, 0), (
        f("Owner", "string"), f("Requester", "string"), f("Renewers", "[]string"),
        f("IssueTimestamp", "int64"), f("MaxTimestamp", "int64"),
        f("ExpirationTimestamp", "int64"), f("TokenId", "string"),
    )),
    11: MessageLayout("UserScramCredentialRecord", (0, 0), (
        f("Name", "string"), f("Mechanism", "int8"), f("Salt", "bytes"),
        f("StoredKey", "bytes"), f("ServerKey", "bytes"), f("Iterations", "int32"),
    )),
    12: MessageLayout("FeatureLevelRecord", (0, 0), (
        f("Name", "string"), f("FeatureLevel", "int16"),
    )),
    14: MessageLayout("ClientQuotaRecord", (0, 0), (
        f("Entity", StructArray((f("EntityType", "string"),
                            f("EntityName", "string", nullable=0)))),
        f("Key", "string"), f("Value", "float64"), f("Remove", "bool"),
    )),
    15: MessageLayout("ProducerIdsRecord", (0, 0), (
        f("BrokerId", "int32"), f("BrokerEpoch", "int64"), f("NextProducerId", "int64"),
    )),
    17: MessageLayout("BrokerRegistrationChangeRecord", (0, 3), (
        f("BrokerId", "int32"),
        f("BrokerEpoch", "int64"),
        f("Fenced", "int8", tag=0),
        f("InControlledShutdown", "int8", 1, tag=1),
        f("LogDirs", "[]uuid", 2, tag=2),
        f("CordonedLogDirs", "[]uuid", 3, nullable=3, tag=3, default=None),  # Kafka 4.x
    )),
    18: MessageLayout("AccessControlEntryRecord", (0, 0), (
        f("Id", "uuid"), f("ResourceType", "int8"), f("ResourceName", "string"),
        f("PatternType", "int8"), f("Principal", "string"), f("Host", "string"),
        f("Operation", "int8"), f("PermissionType", "int8"),
    )),
    19: MessageLayout("RemoveAccessControlEntryRecord", (0, 0), (f("Id", "uuid"),)),
    20: MessageLayout("NoOpRecord", (0, 0), ()),
    21: MessageLayout("ZkMigrationStateRecord", (0, 0), (f("ZkMigrationState", "int8"),)),
    22: MessageLayout("RemoveUserScramCredentialRecord", (0, 0), (
        f("Name", "string"), f("Mechanism", "int8"),
    )),
    23: MessageLayout("BeginTransactionRecord", (0, 0), (
        f("Name", "string", nullable=0, tag=0, default=None),
    )),
    24: MessageLayout("EndTransactionRecord", (0, 0), ()),
    25: MessageLayout("AbortTransactionRecord", (0, 0), (
        f("Reason", "string", nullable=0, tag=0, default=None),
    )),
    26: MessageLayout("RemoveDelegationTokenRecord", (0, 0), (f("TokenId", "string"),)),
    27: MessageLayout("RegisterControllerRecord", (0, 0), (
        f("ControllerId", "int32"),
        f("IncarnationId", "uuid"),
        f("ZkMigrationReady", "bool"),
        f("EndPoints", StructArray(_ENDPOINT)),
        f("Features", StructArray(_FEATURE)),
    )),
    28: MessageLayout("ClearElrRecord", (0, 0), (f("TopicName", "string"),)),
}  # fmt: skip

# Control record type -> layout (Raft's own records; the value starts with its version).
CONTROL: dict[int, MessageLayout] = {
    2: MessageLayout("LeaderChangeMessage", (0, 1), (
        f("Version", "int16"),
        f("LeaderId", "int32"),
        f("Voters", StructArray((f("VoterId", "int32"),
                            f("VoterDirectoryId", "uuid", 1)))),
        f("GrantingVoters", StructArray((f("VoterId", "int32"),
                                    f("VoterDirectoryId", "uuid", 1)))),
    )),
    3: MessageLayout("SnapshotHeaderRecord", (0, 0), (
        f("Version", "int16"), f("LastContainedLogTimestamp", "int64"),
    )),
    4: MessageLayout("SnapshotFooterRecord", (0, 0), (f("Version", "int16"),)),
    5: MessageLayout("KRaftVersionRecord", (0, 0), (
        f("Version", "int16"), f("KRaftVersion", "int16"),
    )),
    6: MessageLayout("VotersRecord", (0, 0), (
        f("Version", "int16"),
        f("Voters", StructArray((
            f("VoterId", "int32"),
            f("VoterDirectoryId", "uuid"),
            f("Endpoints", StructArray((f("Name", "string"), f("Host", "string"),
                                   f("Port", "uint16")))),
            f("KRaftVersionFeature", Struct((f("MinSupportedVersion", "int16"),
                                             f("MaxSupportedVersion", "int16")))),
        ))),
    )),
}  # fmt: skip

CONTROL_NAMES = {0: "Abort", 1: "Commit", **{k: v.name for k, v in CONTROL.items()}}
