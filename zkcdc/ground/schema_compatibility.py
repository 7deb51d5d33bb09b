"""Whether a new version of one of zkcdc's Avro schemas keeps the contract with an older one.

Two checks, both needed: Avro's schema resolution run by fastavro on real records (each
version's records read with the other version as reader: BACKWARD and FORWARD, i.e. FULL), and
the contract's own rules, stricter than Avro's (avro/README.md): a field is never removed, a new
field has a default, a new enum symbol needs the enum to carry a default already. Random records
may miss a case (a union branch, a new symbol); the rules do not."""

from __future__ import annotations

import functools
import io
import json
import random
from collections.abc import Iterator
from typing import Any

import fastavro
from fastavro.schema import expand_schema
from fastavro.utils import generate_many


def full_problems(older: Any, newer: Any, samples: int = 60) -> list[str]:
    """What breaks readers or writers of `older` when `newer` is released; empty if nothing."""
    return (
        contract_problems(older, newer)
        + read_problems(older, newer, samples, names=("older", "newer"))
        + read_problems(newer, older, samples, names=("newer", "older"))
    )


def read_problems(
    writer: Any,
    reader: Any,
    samples: int = 60,
    names: tuple[str, str] = ("writer's", "reader's"),
    seed: int = 23,
) -> list[str]:
    """Records of `writer`'s schema that a reader holding `reader` cannot read."""
    written = fastavro.parse_schema(writer, named_schemas={})
    read = fastavro.parse_schema(reader, named_schemas={})
    for data in _sample_records(json.dumps(writer, sort_keys=True), samples, seed):
        try:
            fastavro.schemaless_reader(io.BytesIO(data), written, read)
        except Exception as exc:  # fastavro's resolution errors have no common base
            return [f"a reader of the {names[1]} version cannot read a record written with the "
                    f"{names[0]} one: {exc}"]  # fmt: skip
    return []


@functools.lru_cache(maxsize=32)
def _sample_records(writer_text: str, samples: int, seed: int) -> tuple[bytes, ...]:
    """`samples` random records of a schema, encoded: the same ones every run (a failure
    reproduces), and made once a process for each schema. Making them is most of a check's
    time, and each version is the writer against every other. fastavro fills every array and
    map with 10 items, so 60 change records hold 600 events and ~150,000 values: each union
    branch and enum symbol is drawn many times over (300 records took 4.5 s to make)."""
    written = fastavro.parse_schema(json.loads(writer_text), named_schemas={})
    state = random.getstate()
    random.seed(seed)
    try:
        records = list(generate_many(written, samples))
    finally:
        random.setstate(state)
    out = []
    for record in records:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, written, record)
        out.append(buffer.getvalue())
    return tuple(out)


def contract_problems(older: Any, newer: Any) -> list[str]:
    return list(_walk(expand_schema(older), expand_schema(newer), ""))


def _walk(old: Any, new: Any, where: str) -> Iterator[str]:
    old, new = _nonnull(old), _nonnull(new)
    if isinstance(old, list) or isinstance(new, list):
        old_branches = {_type_key(b): b for b in (old if isinstance(old, list) else [old])}
        for branch in new if isinstance(new, list) else [new]:
            if _type_key(branch) in old_branches:
                yield from _walk(old_branches[_type_key(branch)], branch, where)
        return
    if not isinstance(old, dict) or not isinstance(new, dict) or old["type"] != new["type"]:
        return  # a type change: Avro's resolution (read_problems) says whether it promotes
    kind = old["type"]
    if kind == "record":
        name = new.get("name", where)
        old_fields = {f["name"]: f for f in old["fields"]}
        new_fields = {f["name"]: f for f in new["fields"]}
        for gone in old_fields.keys() - new_fields.keys():
            yield f"field {name}.{gone} removed (fields are never removed)"
        for field in new["fields"]:
            if field["name"] not in old_fields:
                if "default" not in field:
                    yield f"field {name}.{field['name']} added without a default"
            else:
                yield from _walk(old_fields[field["name"]]["type"], field["type"],
                                 f"{name}.{field['name']}")  # fmt: skip
    elif kind == "enum":
        added = [s for s in new["symbols"] if s not in old["symbols"]]
        removed = [s for s in old["symbols"] if s not in new["symbols"]]
        if added and "default" not in old:
            yield (f"enum {new['name']} gains {', '.join(added)} but its older version has no "
                   "default: its readers cannot read them")  # fmt: skip
        if removed and "default" not in new:
            yield f"enum {new['name']} loses {', '.join(removed)} and has no default"
    elif kind == "array":
        yield from _walk(old["items"], new["items"], where)
    elif kind == "map":
        yield from _walk(old["values"], new["values"], where)


def _nonnull(schema: Any) -> Any:
    if isinstance(schema, list):
        rest = [b for b in schema if b != "null"]
        return rest[0] if len(rest) == 1 else rest
    return schema


def _type_key(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name") or schema["type"])
    return str(schema)
