"""The change records as a streaming DataFrame: from the changes topic (Kafka source, Avro
single-object or Confluent framing) or from event-log folders (Avro file source). Same columns
either way: cluster, seq, op, path, ts_ms, events (JSON text of the typed events).

pyspark is imported where a DataFrame is built, not at the top: every `zkcdc` command loads
this module, and pyspark's import alone is ~0.5 s."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.schema_files import schema_dir
from zkcdc.streaming.errors import StreamingError


def schema_json() -> str:
    return (schema_dir() / "ChangeRecord.avsc").read_text()


def single_object_header() -> bytes:
    parsed = parse_schema(json.loads(schema_json()))
    return b"\xc3\x01" + bytes.fromhex(
        fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO")
    )


@dataclass(frozen=True)
class KafkaInput:
    kafka: KafkaConnection
    topic: str = "zkcdc.changes"
    starting_offsets: str = "earliest"
    registry: bool = False  # Confluent framing: magic 0 + 4-byte schema id
    max_records_per_batch: int | None = None  # a backlog goes in several bounded micro-batches


@dataclass(frozen=True)
class LogInput:
    folder: Path


def spark_kafka_options(kafka: KafkaConnection) -> dict[str, str]:
    """The connection as Spark's Kafka source and sink take it: Java client names, `kafka.`."""
    return {f"kafka.{name}": value for name, value in kafka.java().items()}


def _columns(decoded: Any) -> list[Any]:
    from pyspark.sql import functions as F

    return [
        decoded["cluster"].alias("cluster"),
        decoded["seq"].alias("seq"),
        decoded["op"].alias("op"),
        decoded["path"].alias("path"),
        decoded["ts_ms"].alias("ts_ms"),
        F.to_json(decoded["events"]).alias("events"),
    ]


def read_changes(spark: Any, source: KafkaInput | LogInput) -> tuple[Any, Any | None]:
    """(records, dead letters or None). A dead letter keeps the raw value and why it failed."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    if isinstance(source, LogInput):
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
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.avro")
            .load(str(source.folder))
        )
        return files.select(*_columns(F.struct(*[F.col(c) for c in struct.names]))), None

    raw = (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(source.kafka))
        .option("subscribe", source.topic)
        .option("startingOffsets", source.starting_offsets)
        .option("failOnDataLoss", "false")
        # An executor's consumer that reaches the end of what a micro-batch reads waits this
        # long for more from the broker: at Kafka's default (500 ms) it was most of a live
        # micro-batch with a handful of records (BENCHMARKS.md, B3).
        .option("kafka.fetch.max.wait.ms", "10")
        # A micro-batch's range of a partition in one or two fetches instead of a round trip
        # to the broker per megabyte (the default), each waited for in turn.
        .option("kafka.max.partition.fetch.bytes", str(16 * 2**20))
        .option("kafka.max.poll.records", "10000")
    )
    if source.max_records_per_batch:
        raw = raw.option("maxOffsetsPerTrigger", str(source.max_records_per_batch))
    raw = raw.load()
    if source.registry:
        header_ok = F.substring("value", 1, 1) == F.lit(b"\x00")
        body = F.expr("substring(value, 6, length(value) - 5)")
        reason = "no Confluent wire-format header"
    else:
        header_ok = F.substring("value", 1, 10) == F.lit(single_object_header())
        body = F.expr("substring(value, 11, length(value) - 10)")
        reason = "not single-object encoded with ChangeRecord.avsc's fingerprint"
    decoded = raw.select(
        "topic",
        "partition",
        "offset",
        "value",
        header_ok.alias("header_ok"),
        from_avro(body, schema_json(), {"mode": "PERMISSIVE"}).alias("r"),
    )
    # PERMISSIVE gives a struct of nulls for a body that does not decode; cluster is never null.
    ok = F.col("header_ok") & F.col("r.cluster").isNotNull()
    good = decoded.where(ok)
    records = good.select(*_columns(F.col("r")))
    dead = decoded.where(~ok).select(
        "topic",
        "partition",
        "offset",
        "value",
        F.when(~F.col("header_ok"), F.lit(reason))
        .otherwise(F.lit("Avro body does not decode with ChangeRecord.avsc"))
        .alias("reason"),
    )
    return records, dead
