"""The change records as a streaming DataFrame: from the changes topic (Kafka source, Avro
single-object or Confluent framing) or from event-log folders (Avro file source). Same columns
either way: cluster, seq, op, path, ts_ms, events (JSON text of the typed events), and the few
fields of the events that the shards' routing reads, typed (`ROUTING_EVENTS`).

pyspark is imported where a DataFrame is built, not at the top: every `zkcdc` command loads
this module, and pyspark's import alone is ~0.5 s."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from zkcdc.ground.change_values import (
    ChangeValueDecoder,
    ValueDecodeError,
    registry_fetcher,
    released_by_fingerprint,
)
from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError
from zkcdc.ground.schema_files import schema_dir
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.python_worker import ready_for_next_tasks


def schema_json() -> str:
    return (schema_dir() / "ChangeRecord.avsc").read_text()


# What the registry-mode decoder gives Spark: the record's columns, or why it has none.
DECODED_SCHEMA = (
    "cluster string, seq long, op string, path string, ts_ms long, events string, error string"
)
_decoders: dict[str, ChangeValueDecoder] = {}  # one per registry, per Python worker


@dataclass(frozen=True)
class KafkaInput:
    kafka: KafkaConnection
    topic: str = "zkcdc.changes"
    starting_offsets: str = "earliest"
    # With a schema registry's URL, values may also be in Confluent's wire format (magic 0 +
    # schema id), the writer schema fetched from it by id.
    registry_url: str | None = None
    max_records_per_batch: int | None = None  # a backlog goes in several bounded micro-batches
    # Spark's JSON of offsets per partition: read as a batch, up to these (initial_state.py).
    ending_offsets: str | None = None


@dataclass(frozen=True)
class LogInput:
    folder: Path


def source_partitions(source: KafkaInput | LogInput, timeout_s: float = 15.0) -> int:
    """How many partitions the source has, each of which the job's order waits for
    (streaming/rules/seq_order.py): an event log is one; a topic Kafka cannot tell of yet
    counts those its records come from."""
    if isinstance(source, LogInput):
        return 1
    try:
        found = source.kafka.list_topics(timeout_s).topics.get(source.topic)
    except KafkaConnectionError:
        return 1
    if found is None or found.error is not None or not found.partitions:
        return 1
    return len(found.partitions)


def spark_kafka_options(kafka: KafkaConnection) -> dict[str, str]:
    """The connection as Spark's Kafka source and sink take it: Java client names, `kafka.`.
    A `default.api.timeout.ms` given (`--kafka-config java.default.api.timeout.ms=...`) also
    bounds the executors' reads (`kafkaConsumer.pollTimeoutMs`, else Spark's network timeout,
    120 s): one setting says how long the job's reads wait for an unanswering broker."""
    java = kafka.java()
    options = {f"kafka.{name}": value for name, value in java.items()}
    if (timeout := java.get("default.api.timeout.ms")) is not None:
        options["kafkaConsumer.pollTimeoutMs"] = timeout
    return options


def _columns(decoded: Any, partition: Any) -> list[Any]:
    from pyspark.sql import functions as F

    events = decoded["events"]
    return [
        decoded["cluster"].alias("cluster"),
        decoded["seq"].alias("seq"),
        partition.alias("partition"),
        decoded["op"].alias("op"),
        decoded["path"].alias("path"),
        decoded["ts_ms"].alias("ts_ms"),
        F.to_json(events).alias("events"),
        # Each a field of every event (an array of it), not a higher-order function over the
        # events: one would keep Spark from compiling the projection (shard_stage.routed).
        F.arrays_zip(*[events[name].alias(name) for name in ROUTING_FIELDS])
        .cast(ROUTING_EVENTS_TYPE)
        .alias(ROUTING_EVENTS),
    ]


def read_changes(spark: Any, source: KafkaInput | LogInput) -> tuple[Any, Any | None]:
    """(records, dead letters or None). A dead letter keeps the raw value and why it failed."""
    from pyspark.sql import functions as F

    if isinstance(source, LogInput):
        return _log_records(spark, source), None
    decoded = _decoded(spark, source)
    ok = F.col("reason").isNull()
    records = decoded.where(ok).select(*SOURCE_COLUMNS)
    dead = decoded.where(~ok).select("topic", "partition", "offset", "value", "reason")
    return records, dead


def changes_with_dead_letters(spark: Any, source: KafkaInput | LogInput) -> Any:
    """The records with the dead letters among them, from one read of the source: a dead
    letter is a row whose cluster is null, op `DEAD_LETTER_OP`, `path` the letter's key
    (topic/partition/offset) and `events` the letter's JSON. One query then serves both: a
    second query for the dead letters ran micro-batches of its own beside the alerts' and
    slowed them (B9, 40 partitions: micro-batch p50 ~970 -> ~820 ms without it)."""
    from pyspark.sql import functions as F

    if isinstance(source, LogInput):
        return _log_records(spark, source)
    decoded = _decoded(spark, source)
    letter = F.to_json(
        F.struct("topic", "partition", "offset", "reason", F.base64("value").alias("value_base64"))
    )
    dead = {
        "cluster": F.lit(None).cast("string"),
        "seq": F.col("offset"),
        "partition": F.col("partition"),
        "op": F.lit(DEAD_LETTER_OP),
        "path": F.concat_ws("/", "topic", "partition", "offset"),
        "ts_ms": F.lit(0).cast("long"),
        "events": letter,
        ROUTING_EVENTS: F.lit(None).cast(ROUTING_EVENTS_TYPE),
    }
    ok = F.col("reason").isNull()
    return decoded.select(
        *[F.when(ok, F.col(c)).otherwise(dead[c]).alias(c) for c in SOURCE_COLUMNS]
    )


# partition: the source's partition the record was read from (an event log is one), which
# the job's order waits on (streaming/rules/seq_order.py).
RECORD_COLUMNS = ("cluster", "seq", "partition", "op", "path", "ts_ms", "events")
DEAD_LETTER_OP = "DEAD"
# Beside them, the fields of each event that the shards' routing reads (shard_stage.routed),
# typed as the decoded record has them: the routing needs no parse of the events' JSON, which
# Spark runs interpreted (`from_json`: a fifth of the CPU of the stage that reads, decodes and
# routes B3's records). Null where a record comes as JSON alone (a schema registry's values,
# decoded in Python; a dead letter): the routing parses those.
ROUTING_EVENTS = "routing_events"
_ROUTING_TYPES = {
    "type": "string", "topic": "string", "partition": "int", "leader": "int",
    "leader_after": "int",
}  # fmt: skip
ROUTING_FIELDS = tuple(_ROUTING_TYPES)
# One list of names and types: the cast below names the zipped fields by position.
ROUTING_EVENTS_TYPE = (
    f"array<struct<{','.join(f'{name}:{kind}' for name, kind in _ROUTING_TYPES.items())}>>"
)
SOURCE_COLUMNS = (*RECORD_COLUMNS, ROUTING_EVENTS)


def read_change_structs(spark: Any, source: KafkaInput | LogInput) -> Any:
    """The change records as one column `r`, the whole record typed as ChangeRecord.avsc says
    (enums as their symbols): what the lake keeps. Messages that do not decode are left out
    here (the alert job sends them to its dead-letter topic)."""
    from pyspark.sql import functions as F

    if isinstance(source, LogInput):
        return _log_structs(spark, source)
    if source.registry_url:
        raise StreamingError(
            "the lake reads single-object encoded values only (not with --schema-registry)"
        )
    decoded = _decoded_structs(spark, source)
    return decoded.where(F.col("header_ok") & F.col("r.cluster").isNotNull()).select("r")


def _log_records(spark: Any, source: LogInput) -> Any:
    from pyspark.sql import functions as F

    return _log_structs(spark, source).select(*_columns(F.col("r"), F.lit(0)))


def _log_structs(spark: Any, source: LogInput) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    if not source.folder.is_dir():
        raise StreamingError(f"no event-log folder at {source.folder}")
    struct = (
        spark.range(0)
        .select(from_avro(F.lit(b"").cast("binary"), schema_json()).alias("r"))
        .schema["r"]
        .dataType
    )
    files = (
        spark.readStream.format("avro")
        .schema(struct)
        # Each file is read with Avro's schema resolution from the schema in its header
        # (an older zkcdc's) into today's.
        .option("avroSchema", schema_json())
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.avro")
        .load(str(source.folder))
    )
    return files.select(F.struct(*[F.col(c) for c in struct.names]).alias("r"))


def _decoded(spark: Any, source: KafkaInput) -> Any:
    """The topic's messages, each with its place, its value, its record's columns
    (RECORD_COLUMNS), and `reason`: null for a change record, else why it is a dead letter."""
    from pyspark.sql import functions as F

    if source.registry_url:
        return _decoded_in_python(_raw_messages(spark, source), source.registry_url)
    decoded = _decoded_structs(spark, source)
    # PERMISSIVE gives a struct of nulls for a body that does not decode; cluster is never null.
    # `partition` is among the record's columns (_columns).
    return decoded.select(
        "topic",
        "offset",
        "value",
        *_columns(F.col("r"), F.col("partition")),
        F.when(~F.col("header_ok"), F.lit(NOT_SINGLE_OBJECT))
        .when(F.col("r.cluster").isNull(), F.lit(NOT_DECODED))
        .alias("reason"),
    )


def _raw_messages(spark: Any, source: KafkaInput) -> Any:
    bounded = source.ending_offsets is not None
    raw = (
        (spark.read if bounded else spark.readStream)
        .format("kafka")
        .options(**spark_kafka_options(source.kafka))
        .option("subscribe", source.topic)
        .option("startingOffsets", source.starting_offsets)
        .option("failOnDataLoss", "false")
        # Committed records only: capture publishes in transactions, and what a fenced daemon
        # had in flight is aborted (the Java client's default would read it).
        .option("kafka.isolation.level", "read_committed")
        # An executor's consumer that reaches the end of what a micro-batch reads waits this
        # long for more from the broker: at Kafka's default (500 ms) it was most of a live
        # micro-batch with a handful of records (BENCHMARKS.md, B3).
        .option("kafka.fetch.max.wait.ms", "10")
        # A micro-batch's range of a partition in one or two fetches instead of a round trip
        # to the broker per megabyte (the default), each waited for in turn.
        .option("kafka.max.partition.fetch.bytes", str(16 * 2**20))
        .option("kafka.max.poll.records", "10000")
    )
    if bounded:
        raw = raw.option("endingOffsets", source.ending_offsets)
    elif source.max_records_per_batch:
        raw = raw.option("maxOffsetsPerTrigger", str(source.max_records_per_batch))
    return raw.load()


def _decoded_structs(spark: Any, source: KafkaInput) -> Any:
    """The topic's single-object encoded messages: place, value, `header_ok` (a released
    version's fingerprint) and `r`, the record decoded into today's schema."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    raw = _raw_messages(spark, source)
    header = F.substring("value", 1, 10)
    body = F.expr("substring(value, 11, length(value) - 10)")
    current = schema_json()
    # One from_avro per released version, picked by the fingerprint in the header; each reads
    # its version's bytes into today's schema (Spark's `avroSchema`: Avro schema resolution).
    released = released_by_fingerprint()
    by_version = [
        F.when(header == F.lit(b"\xc3\x01" + fp),
               from_avro(body, json.dumps(schema), {"mode": "PERMISSIVE", "avroSchema": current}))
        for fp, schema in released.items()
    ]  # fmt: skip
    known = F.lit(False)
    for fp in released:
        known = known | (header == F.lit(b"\xc3\x01" + fp))
    return raw.select(
        "topic",
        "partition",
        "offset",
        "value",
        known.alias("header_ok"),
        F.coalesce(*by_version).alias("r"),
    )


NOT_SINGLE_OBJECT = (
    "not single-object encoded with a released ChangeRecord version's fingerprint "
    "(Confluent-framed values need --schema-registry)"
)
NOT_DECODED = "Avro body does not decode with ChangeRecord.avsc"


def _decoded_in_python(raw: Any, registry_url: str) -> Any:
    """Both wire forms, decoded by fastavro in Spark's Python workers: a Confluent-framed
    value's writer schema comes from the registry by id (fetched once per id and worker)."""
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql import functions as F

    function = decode_values(registry_url)
    # Spark picks the kind of pandas UDF from real type hints (this module leaves pandas out).
    function.__annotations__ = {"values": pd.Series, "return": pd.DataFrame}
    decode = F.pandas_udf(function, DECODED_SCHEMA)  # type: ignore[attr-defined]
    decoded = raw.select("topic", "partition", "offset", "value", decode("value").alias("r"))
    return decoded.select(
        "topic", "offset", "value",
        *[F.col(c if c == "partition" else f"r.{c}").alias(c) for c in RECORD_COLUMNS],
        F.lit(None).cast(ROUTING_EVENTS_TYPE).alias(ROUTING_EVENTS),
        F.col("r.error").alias("reason"),
    )  # fmt: skip


def decode_values(registry_url: str) -> Any:
    def decode(values: Any) -> Any:
        import pandas as pd

        ready_for_next_tasks()

        decoder = _decoders.get(registry_url)
        if decoder is None:
            decoder = _decoders[registry_url] = ChangeValueDecoder(registry_fetcher(registry_url))
        rows = [decoded_row(decoder, v) for v in values.tolist()]
        columns = ("cluster", "seq", "op", "path", "ts_ms", "events", "error")
        return pd.DataFrame(rows, columns=columns)

    return decode


def decoded_row(decoder: ChangeValueDecoder, value: bytes | None) -> tuple[Any, ...]:
    """A value as the job's columns (events as the JSON text Spark's `to_json` makes: null
    fields left out), or a row naming why it does not decode."""
    if value is None:
        return (None,) * 6 + ("no value",)
    try:
        r = decoder.decode(bytes(value))
    except ValueDecodeError as exc:
        return (None,) * 6 + (str(exc),)
    events = [{k: v for k, v in e.items() if v is not None} for e in r["events"]]
    return (r["cluster"], r["seq"], r["op"], r["path"], r["ts_ms"],
            orjson.dumps(events).decode(), None)  # fmt: skip
