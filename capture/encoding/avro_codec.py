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


def decode_value(codec: SingleObjectCodec, data: bytes) -> dict[str, Any]:
    """A value in either wire form: single-object, or Confluent's (magic 0 + 4-byte schema id,
    written by zkcdc with this same schema)."""
    if data[:1] == b"\x00" and len(data) > 5:
        try:
            value = fastavro.schemaless_reader(io.BytesIO(data[5:]), codec.schema, codec.schema)
        except (EOFError, ValueError, IndexError) as exc:
            raise CodecError(f"corrupt Avro body: {exc}") from exc
        return value  # type: ignore[return-value]
    return codec.decode(data)


def registry_serializer(
    url: str, schema: dict[str, Any], topic: str
) -> Callable[[dict[str, Any]], bytes]:
    """Confluent wire format (magic 0, 4-byte schema id) through confluent-kafka's serializer,
    registering the schema under the topic's value subject."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": url})
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


def schema_json(name: str = "ChangeRecord") -> dict[str, Any]:
    return json.loads((schema_dir() / f"{name}.avsc").read_text())  # type: ignore[no-any-return]
