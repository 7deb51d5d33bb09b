"""The kinds of change every part of zkcdc speaks of, in one module (as Debezium keeps its
envelope's operations where every connector imports them): a record's `op` and its events'
`type`. Both are `StrEnum`s, so a decoded record's plain strings compare equal to them, and a
misspelt member fails where it is written, not at run time."""

from __future__ import annotations

import enum


class Op(enum.StrEnum):
    READ = "READ"
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    HEARTBEAT = "HEARTBEAT"


class EventType(enum.StrEnum):
    """The typed meaning of a change (a record's `events[].type`). Each member's comment is
    its reference entry: what happened, then the event's own fields (beside the entity fields
    `topic`, `partition`, `broker_id`, `group` that apply)."""

    # A broker registered: `/brokers/ids/N` created (ZooKeeper) or a `RegisterBrokerRecord` (KRaft).
    # broker_id, host, port, endpoints, rack, broker_epoch (the znode's czxid).
    BROKER_REGISTERED = "BROKER_REGISTERED"
    # A broker's registration went away: `/brokers/ids/N` deleted (its session ended) or
    # unregistered in KRaft. broker_id.
    BROKER_DEREGISTERED = "BROKER_DEREGISTERED"
    # A registered broker's registration changed (endpoints, rack, features). broker_id and the
    # fields as for BROKER_REGISTERED.
    BROKER_UPDATED = "BROKER_UPDATED"
    # A broker became the controller: `/controller` created or rewritten. broker_id,
    # broker_id_before.
    CONTROLLER_ELECTED = "CONTROLLER_ELECTED"
    # `/controller` deleted: no broker is controller until the next election. broker_id_before.
    CONTROLLER_RESIGNED = "CONTROLLER_RESIGNED"
    # `/controller_epoch` (a bare integer) changed. epoch_before, epoch_after.
    CONTROLLER_EPOCH_CHANGED = "CONTROLLER_EPOCH_CHANGED"
    # A topic's assignment appeared: `/brokers/topics/T` created. topic, topic_id, assignment
    # {partition: replicas}.
    TOPIC_CREATED = "TOPIC_CREATED"
    # A topic's assignment was deleted. topic, topic_id.
    TOPIC_DELETED = "TOPIC_DELETED"
    # A topic's assignment gained partitions. topic, assignment of the new partitions.
    PARTITIONS_ADDED = "PARTITIONS_ADDED"
    # One partition's replica list changed in its topic's assignment (a reassignment's steps).
    # topic, partition, replicas_before/after, adding, removing.
    REPLICAS_CHANGED = "REPLICAS_CHANGED"
    # A partition's state appeared: `.../partitions/P/state` created. topic, partition, leader, isr,
    # leader_epoch, controller_epoch.
    PARTITION_STATE_CREATED = "PARTITION_STATE_CREATED"
    # A partition's leader changed. leader_before/after, leader_epoch_before/after,
    # isr_before/after, clean (the new leader was in isr_before).
    LEADER_CHANGED = "LEADER_CHANGED"
    # A partition's leader epoch rose with the same leader. leader_epoch_before/after.
    LEADER_EPOCH_BUMPED = "LEADER_EPOCH_BUMPED"
    # Replicas left a partition's ISR. isr_before/after, removed.
    ISR_SHRUNK = "ISR_SHRUNK"
    # Replicas joined a partition's ISR. isr_before/after, added.
    ISR_EXPANDED = "ISR_EXPANDED"
    # A partition's leader became -1: no replica can serve it.
    PARTITION_OFFLINE = "PARTITION_OFFLINE"
    # `/admin/reassign_partitions` created or changed. partitions [{topic, partition, replicas}].
    REASSIGNMENT_REQUESTED = "REASSIGNMENT_REQUESTED"
    # `/admin/reassign_partitions` deleted: the controller finished the reassignment. partitions.
    REASSIGNMENT_COMPLETED = "REASSIGNMENT_COMPLETED"
    # `/admin/preferred_replica_election` created. partitions.
    PREFERRED_ELECTION_REQUESTED = "PREFERRED_ELECTION_REQUESTED"
    # `/admin/preferred_replica_election` deleted. partitions.
    PREFERRED_ELECTION_COMPLETED = "PREFERRED_ELECTION_COMPLETED"
    # `/admin/delete_topics/T` created. topic.
    TOPIC_DELETION_REQUESTED = "TOPIC_DELETION_REQUESTED"
    # `/admin/delete_topics/T` deleted: the controller deleted the topic. topic.
    TOPIC_DELETION_COMPLETED = "TOPIC_DELETION_COMPLETED"
    # A dynamic config changed: `/config/<type>/<name>` (or a KRaft ConfigRecord). entity_type,
    # entity_name, config_before/after, changed_keys.
    CONFIG_CHANGED = "CONFIG_CHANGED"
    # A legacy consumer joined its group: `/consumers/G/ids/C` created. group, consumer_id,
    # subscription {topic: threads}, pattern.
    CONSUMER_REGISTERED = "CONSUMER_REGISTERED"
    # A legacy consumer left its group: `/consumers/G/ids/C` deleted. group, consumer_id.
    CONSUMER_DEREGISTERED = "CONSUMER_DEREGISTERED"
    # A legacy group's partition changed owner: `/consumers/G/owners/T/P`. group, topic, partition,
    # owner_before/after.
    PARTITION_OWNER_CHANGED = "PARTITION_OWNER_CHANGED"
    # A legacy group committed an offset: `/consumers/G/offsets/T/P`. group, topic, partition,
    # offset_before/after.
    OFFSET_COMMITTED = "OFFSET_COMMITTED"
    # A broker announced ISR changes: `/isr_change_notification/*`. partitions.
    ISR_CHANGE_NOTIFIED = "ISR_CHANGE_NOTIFIED"
    # A broker announced a failed log directory: `/log_dir_event_notification/*`. broker_id.
    LOG_DIR_FAILED = "LOG_DIR_FAILED"
    # A known path held data zkcdc could not decode. reason; the raw bytes stay in the record's
    # before/after.
    UNPARSEABLE = "UNPARSEABLE"
    # A change under a path outside zkcdc's model of Kafka's tree. The raw znode is in the record.
    UNKNOWN_ZNODE = "UNKNOWN_ZNODE"
    # KRaft: a broker was fenced (it may not lead or follow). broker_id.
    BROKER_FENCED = "BROKER_FENCED"
    # KRaft: a fenced broker was unfenced. broker_id.
    BROKER_UNFENCED = "BROKER_UNFENCED"
    # KRaft: a broker began a controlled shutdown. broker_id.
    BROKER_CONTROLLED_SHUTDOWN = "BROKER_CONTROLLED_SHUTDOWN"
    # KRaft: a partition's eligible leader replicas (ELR) changed. elr_before/after, last_known_elr.
    ELR_CHANGED = "ELR_CHANGED"
    # KRaft: a feature's finalized level changed (`metadata.version` among them). feature,
    # level_before/after.
    FEATURE_LEVEL_CHANGED = "FEATURE_LEVEL_CHANGED"
    # KRaft: the controller quorum's voters changed. voters.
    CONTROLLER_QUORUM_CHANGED = "CONTROLLER_QUORUM_CHANGED"
    # A ZooKeeper-to-KRaft migration moved on (`/migration`, or KRaft's ZkMigrationStateRecord).
    # migration_state_before/after.
    MIGRATION_STATE_CHANGED = "MIGRATION_STATE_CHANGED"
    # A znode capture may not read (its ACL gives capture no READ): path and reason, no image.
    ZNODE_UNREADABLE = "ZNODE_UNREADABLE"
    # ZooKeeper's history is not the one capture saved (an ensemble rebuilt or restored): what
    # capture found, in `reason`; the differences from its saved tree follow as records.
    ZOOKEEPER_HISTORY_CHANGED = "ZOOKEEPER_HISTORY_CHANGED"
    # A partition's state was rewritten with only its controller epoch changed: a controller
    # wrote it again, leader, ISR and epochs as they were. leader, isr_before/after,
    # controller_epoch (the epoch it was written with), epoch_before (the one it had before).
    # A KRaft capture taking over from a ZooKeeper one does not say it: the two number a
    # state's controller epoch differently.
    PARTITION_STATE_REWRITTEN = "PARTITION_STATE_REWRITTEN"
