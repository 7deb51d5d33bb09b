"""The entities' intervals, as views over `znodes`: a partition's state, a broker's session
and the controller's terms, each one row per interval with where it began and ended (seq and
ms; an open end is null). "State at T" is then a filter.

They are views, not tables of their own: `znodes` already holds every version of the znodes
they read with its interval, kept by one MERGE a micro-batch, and a view cannot disagree with
it. They read the znodes' JSON as Kafka writes it (a KRaft cluster's tree is rendered in the
same form at capture), and follow the rules engine's view of each entity:

- `partition_states`: a partition exists from its topic's assignment to its topic's deletion;
  a new interval begins at each version of its state znode and of its topic's znode
  (replicas, replicas being added and removed). Before its first state znode, its leader is
  null and its epochs -1, as the engine has them.
- `broker_sessions`: a registration, from the broker's znode getting its data to its deletion;
  its epoch is the znode's czxid (Kafka's broker epoch); its endpoints are its last version's.
- `controller_terms`: each version of `/controller`; its epoch is the KRaft controller's own,
  or the `/controller_epoch` the controller wrote in its term (the one before, if none)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class View(StrEnum):
    PARTITION_STATES = "partition_states"
    BROKER_SESSIONS = "broker_sessions"
    CONTROLLER_TERMS = "controller_terms"


_PARTITION_STATES = r"""
WITH topic_versions AS (
  SELECT cluster, topic, from_seq, from_ms, to_seq, to_ms,
         from_json(CAST(znode.data AS STRING),
                   'partitions MAP<STRING, ARRAY<INT>>, adding_replicas MAP<STRING, ARRAY<INT>>,
                    removing_replicas MAP<STRING, ARRAY<INT>>') AS t
  FROM znodes WHERE path RLIKE '^/brokers/topics/[^/]+$'
), assigned AS (
  SELECT cluster, topic, CAST(p AS INT) AS partition, from_seq, from_ms, to_seq, to_ms,
         replicas, coalesce(t.adding_replicas[p], array()) AS adding,
         coalesce(t.removing_replicas[p], array()) AS removing
  FROM topic_versions LATERAL VIEW explode(t.partitions) e AS p, replicas
), states AS (
  SELECT cluster, topic, partition, from_seq, from_ms, to_seq,
         from_json(CAST(znode.data AS STRING),
                   'leader INT, leader_epoch INT, controller_epoch INT, isr ARRAY<INT>') AS s
  FROM znodes WHERE path RLIKE '^/brokers/topics/[^/]+/partitions/[0-9]+/state$'
), points AS (
  SELECT cluster, topic, partition, from_seq AS seq, from_ms AS ms FROM assigned
  UNION SELECT cluster, topic, partition, from_seq, from_ms FROM states
), joined AS (
  SELECT p.cluster, p.topic, p.partition, p.seq, p.ms, a.replicas, a.adding, a.removing,
         a.to_seq AS topic_to_seq, a.to_ms AS topic_to_ms, st.s,
         lead(p.seq) OVER w AS next_seq, lead(p.ms) OVER w AS next_ms
  FROM points p
  LEFT JOIN assigned a ON a.cluster = p.cluster AND a.topic = p.topic
    AND a.partition = p.partition AND a.from_seq <= p.seq AND (a.to_seq IS NULL OR p.seq < a.to_seq)
  LEFT JOIN states st ON st.cluster = p.cluster AND st.topic = p.topic
    AND st.partition = p.partition AND st.from_seq <= p.seq
    AND (st.to_seq IS NULL OR p.seq < st.to_seq)
  WINDOW w AS (PARTITION BY p.cluster, p.topic, p.partition ORDER BY p.seq)
)
SELECT cluster, topic, partition,
       coalesce(replicas, array()) AS replicas, coalesce(adding, array()) AS adding,
       coalesce(removing, array()) AS removing,
       s.leader AS leader, coalesce(s.isr, array()) AS isr,
       coalesce(s.leader_epoch, -1) AS leader_epoch,
       coalesce(s.controller_epoch, -1) AS controller_epoch,
       coalesce(s.leader = -1, false) AS offline,
       coalesce(s.leader <> -1 AND size(s.isr) < size(filter(coalesce(replicas, array()),
                r -> NOT array_contains(coalesce(adding, array()), r))), false)
         AS under_replicated,
       seq AS valid_from_seq, ms AS valid_from_ms,
       CASE WHEN next_seq IS NULL OR topic_to_seq < next_seq THEN topic_to_seq ELSE next_seq END
         AS valid_to_seq,
       CASE WHEN next_seq IS NULL OR topic_to_seq < next_seq THEN topic_to_ms ELSE next_ms END
         AS valid_to_ms
FROM joined
WHERE replicas IS NOT NULL OR s IS NOT NULL
"""

_BROKER_SESSIONS = r"""
SELECT cluster, broker, znode.czxid AS epoch,
       min(CASE WHEN znode.data IS NOT NULL THEN from_seq END) AS registered_seq,
       min(CASE WHEN znode.data IS NOT NULL THEN from_ms END) AS registered_ms,
       max_by(to_seq, from_seq) AS unregistered_seq,
       max_by(to_ms, from_seq) AS unregistered_ms,
       max_by(from_json(CAST(znode.data AS STRING), 'endpoints ARRAY<STRING>').endpoints,
              CASE WHEN znode.data IS NOT NULL THEN from_seq END) AS endpoints
FROM znodes WHERE path RLIKE '^/brokers/ids/[0-9]+$'
GROUP BY cluster, broker, znode.czxid
HAVING registered_seq IS NOT NULL
"""

_CONTROLLER_TERMS = r"""
WITH terms AS (
  SELECT cluster, from_seq, from_ms, to_seq, to_ms,
         from_json(CAST(znode.data AS STRING), 'brokerid INT, kraftControllerEpoch INT') AS c
  FROM znodes WHERE path = '/controller' AND znode.data IS NOT NULL
), epochs AS (
  SELECT cluster, from_seq, to_seq, CAST(CAST(znode.data AS STRING) AS INT) AS epoch
  FROM znodes WHERE path = '/controller_epoch'
), written AS (
  SELECT t.cluster, t.from_seq, min_by(e.epoch, e.from_seq) AS epoch
  FROM terms t JOIN epochs e ON e.cluster = t.cluster AND e.from_seq >= t.from_seq
    AND (t.to_seq IS NULL OR e.from_seq < t.to_seq)
  GROUP BY t.cluster, t.from_seq
)
SELECT t.cluster, t.c.brokerid AS broker,
       coalesce(CASE WHEN t.c.kraftControllerEpoch >= 0 THEN t.c.kraftControllerEpoch END,
                w.epoch, before.epoch) AS epoch,
       t.from_seq, t.from_ms, t.to_seq, t.to_ms
FROM terms t
LEFT JOIN written w ON w.cluster = t.cluster AND w.from_seq = t.from_seq
LEFT JOIN epochs before ON before.cluster = t.cluster AND before.from_seq < t.from_seq
  AND (before.to_seq IS NULL OR before.to_seq > t.from_seq)
"""

SQL = {
    View.PARTITION_STATES: _PARTITION_STATES,
    View.BROKER_SESSIONS: _BROKER_SESSIONS,
    View.CONTROLLER_TERMS: _CONTROLLER_TERMS,
}


def register_views(spark: Any) -> None:
    """Each view under its name, over the `znodes` view already registered."""
    for view, sql in SQL.items():
        spark.sql(sql).createOrReplaceTempView(view.value)
