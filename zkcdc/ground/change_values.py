"""A change record's value on Kafka, in either wire form, read into the current schema.

- Single-object encoding: `C3 01` + the writer schema's CRC-64-AVRO fingerprint + the body.
  The writer schema is the released version (avro/history/) with that fingerprint.
- Confluent's wire format: `00` + a 4-byte schema id + the body. The writer schema is fetched
  from the schema registry by id, once per id.

Either way the body is read with Avro's schema resolution into the schema this zkcdc holds, so
records of an older (or newer, compatible) zkcdc read as today's."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.schema_files import current_schema, released_versions

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"


class ValueDecodeError(ZkcdcError):
    """A value is not a change record zkcdc can read."""


def parsed(schema: Any) -> Any:
    return fastavro.parse_schema(schema, named_schemas={})


def schema_fingerprint(schema: Any) -> bytes:
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed(schema)), "CRC-64-AVRO"))


def released_by_fingerprint(name: str = "ChangeRecord") -> dict[bytes, Any]:
    """Every released version's schema (as JSON) by its fingerprint, and the current one's."""
    out = {schema_fingerprint(s): s for _, s in released_versions(name)}
    current = current_schema(name)
    out[schema_fingerprint(current)] = current
    return out


def registry_fetcher(url: str) -> Callable[[int], str]:
    """The schema text a registry holds under an id (confluent-kafka's client: its auth and
    TLS settings work as they do for the producer)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})

    def fetch(schema_id: int) -> str:
        try:
            return str(client.get_schema(schema_id).schema_str)
        except Exception as exc:  # unreachable, unknown id: one line for the user
            raise ValueDecodeError(f"schema registry {url}: schema id {schema_id}: {exc}") from exc

    return fetch


class ChangeValueDecoder:
    """Decodes values of either wire form. Without a registry, Confluent-framed values are an
    error that says so."""

    def __init__(
        self,
        registry: Callable[[int], str] | None = None,
        reader: Any | None = None,
    ) -> None:
        self.reader = parsed(reader if reader is not None else current_schema("ChangeRecord"))
        self._by_fingerprint = {fp: parsed(s) for fp, s in released_by_fingerprint().items()}
        self._registry = registry
        self._by_id: dict[int, Any] = {}
        self._lock = threading.Lock()

    def decode(self, data: bytes) -> dict[str, Any]:
        if data[:2] == SINGLE_OBJECT_MAGIC and len(data) >= 10:
            writer = self._by_fingerprint.get(data[2:10])
            if writer is None:
                raise ValueDecodeError(
                    f"schema fingerprint {data[2:10].hex()} is no released ChangeRecord version"
                )
            return self._body(data[10:], writer)
        if data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            return self._body(data[5:], self.writer_by_id(int.from_bytes(data[1:5], "big")))
        raise ValueDecodeError("neither single-object encoded nor in Confluent's wire format")

    def writer_by_id(self, schema_id: int) -> Any:
        with self._lock:
            if schema_id in self._by_id:
                return self._by_id[schema_id]
        if self._registry is None:
            raise ValueDecodeError(
                f"Confluent-framed value (schema id {schema_id}): give the schema registry's URL"
            )
        text = self._registry(schema_id)
        try:
            schema = parsed(json.loads(text))
        except (ValueError, fastavro.schema.SchemaParseException) as exc:
            raise ValueDecodeError(f"schema id {schema_id} is no Avro schema: {exc}") from exc
        with self._lock:
            self._by_id[schema_id] = schema
        return schema

    def _body(self, body: bytes, writer: Any) -> dict[str, Any]:
        try:
            value = fastavro.schemaless_reader(io.BytesIO(body), writer, self.reader)
        except Exception as exc:  # corrupt bodies raise EOF, Value, Index and resolution errors
            raise ValueDecodeError(f"Avro body does not decode: {exc}") from exc
        return value  # type: ignore[return-value]
