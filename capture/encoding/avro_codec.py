"""The change-record schema from `avro/` and its two wire forms on Kafka.

Single-object encoding (the default): `C3 01`, the schema's 8-byte CRC-64-AVRO fingerprint
(little-endian), then the Avro binary body, so a consumer holding only the `.avsc` can check
and decode every value. `--schema-registry` switches to Confluent's framing instead."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from zkcdc.capture.encoding.avro_encoder import compile_encoder
from zkcdc.capture.errors import CaptureError
from zkcdc.ground.change_values import ChangeValueDecoder, registry_fetcher
from zkcdc.ground.schema_files import schema_dir

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
HEADER_BYTES = 10


class CodecError(CaptureError):
    """A value is not a change record of the schema zkcdc knows."""


@cache
def load_schema(name: str = "ChangeRecord") -> dict[str, Any]:
    path = schema_dir() / f"{name}.avsc"
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise CodecError(f"cannot read the Avro schema {path}: {exc.strerror}") from exc
    parsed: dict[str, Any] = fastavro.parse_schema(raw)  # type: ignore[assignment]
    return parsed


def schema_fingerprint(schema: dict[str, Any]) -> bytes:
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


class SingleObjectCodec:
    """Encodes and decodes values in Avro single-object encoding for one schema."""

    def __init__(self, schema: dict[str, Any] | None = None) -> None:
        self.schema = schema if schema is not None else load_schema()
        self.header = SINGLE_OBJECT_MAGIC + schema_fingerprint(self.schema)
        self._body = compile_encoder(self.schema, sized_arrays=True)

    def encode(self, value: dict[str, Any]) -> bytes:
        return self.header + self._body(value)

    def decode(self, data: bytes) -> dict[str, Any]:
        if data[:2] != SINGLE_OBJECT_MAGIC:
            raise CodecError("not Avro single-object encoded (no C3 01 marker)")
        if data[:HEADER_BYTES] != self.header:
            raise CodecError(
                f"schema fingerprint {data[2:10].hex()} is not {self.header[2:].hex()}"
            )
        try:
            value = fastavro.schemaless_reader(
                io.BytesIO(data[HEADER_BYTES:]), self.schema, self.schema
            )
        except (EOFError, ValueError, IndexError) as exc:
            raise CodecError(f"corrupt Avro body: {exc}") from exc
        return value  # type: ignore[return-value]


def change_decoder(registry_url: str | None) -> ChangeValueDecoder:
    """Reads values of either wire form, of any released schema version."""
    return ChangeValueDecoder(registry_fetcher(registry_url) if registry_url else None)


def registry_serializer(
    url: str, schema: dict[str, Any], topic: str
) -> Callable[[dict[str, Any]], bytes]:
    """Confluent wire format (magic 0, 4-byte schema id) through confluent-kafka's serializer,
    registering the schema under the topic's value subject."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": url})
    subject = f"{topic}-value"  # the serializer's default subject name strategy
    try:
        guard_compatibility(client, subject)
    except Exception as exc:
        raise CodecError(f"schema registry {url}: {exc}") from exc
    serializer = AvroSerializer(client, json.dumps(schema_json()))
    context = SerializationContext(topic, MessageField.VALUE)

    def serialize(value: dict[str, Any]) -> bytes:
        try:
            data = serializer(value, context)
        except Exception as exc:  # registry unreachable, schema rejected: one reason for the user
            raise CodecError(f"schema registry {url}: {exc}") from exc
        assert isinstance(data, bytes)
        return data

    return serialize


def confluent_header(url: str, topic: str) -> bytes:
    """Magic 0 and the schema id the registry gives today's schema under the topic's value
    subject (registered if new): what goes before a record's Avro body in Confluent's wire
    format. The event log's bodies are today's schema, so they go out as they are."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    subject = f"{topic}-value"
    try:
        guard_compatibility(client, subject)
        schema_id = client.register_schema(subject, Schema(json.dumps(schema_json()), "AVRO"))
    except Exception as exc:  # unreachable, refused as incompatible: one line for the user
        raise CodecError(f"schema registry {url}: {exc}") from exc
    return b"\x00" + int(schema_id).to_bytes(4, "big")


def guard_compatibility(client: Any, subject: str) -> None:
    """A subject zkcdc starts gets FULL_TRANSITIVE compatibility: the registry then refuses
    what avro/README.md calls a breaking change, as the tests do. A level someone set on the
    subject is theirs and left alone."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        client.get_compatibility(subject)
        return
    except SchemaRegistryError as exc:
        if exc.http_status_code != 404:
            raise
    client.set_compatibility(subject, "FULL_TRANSITIVE")


def schema_json(name: str = "ChangeRecord") -> dict[str, Any]:
    return json.loads((schema_dir() / f"{name}.avsc").read_text())  # type: ignore[no-any-return]
