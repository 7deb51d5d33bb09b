"""zkcdc's own layouts of the metadata records (capture/kraft/message_layouts.py) are the
schemas compiled into Kafka's jars, for every record type and version Kafka 3.9.2 and a Kafka
4.x know: the same fields, in the same order, of the same types, with the same tags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from zkcdc.capture.kraft.message_layouts import METADATA, Field, Struct, StructArray
from zkcdc.ground.maven_jars import ArtifactCache
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.stack.kafka_jars import kafka_jars
from zkcdc.stack.settings import KAFKA_4_VERSION, KAFKA_VERSION

pytestmark = pytest.mark.integration
SOURCE = Path(__file__).resolve().parents[2] / "java" / "MetadataSchemas.java"
_SIMPLE = {"int8": "INT8", "int16": "INT16", "uint16": "UINT16", "int32": "INT32",
           "int64": "INT64", "float64": "FLOAT64", "bool": "BOOLEAN", "uuid": "UUID"}  # fmt: skip


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _type(field: Field, version: int) -> str:
    kind, nullable = field.kind, field.nullable_in(version)
    if isinstance(kind, StructArray):
        return "COMPACT_NULLABLE_ARRAY" if nullable else "COMPACT_ARRAY"
    if isinstance(kind, Struct):
        return "STRUCT"
    if kind.startswith("[]"):
        inner = _SIMPLE.get(kind[2:]) or f"COMPACT_{kind[2:].upper()}"
        return f"COMPACT_{'NULLABLE_' if nullable else ''}ARRAY({inner})"
    if kind in ("string", "bytes"):
        return f"COMPACT_{'NULLABLE_' if nullable else ''}{kind.upper()}"
    return _SIMPLE[kind]


def ours(fields: tuple[Field, ...], version: int, path: str = "") -> list[str]:
    regular = [f for f in fields if f.present_in(version) and f.tag is None]
    tagged = sorted((f for f in fields if f.present_in(version) and f.tag is not None),
                    key=lambda f: f.tag or 0)  # fmt: skip
    lines = []
    for field in [*regular, *tagged]:
        name = snake(field.name) if field.tag is None else f"tag{field.tag}:{snake(field.name)}"
        lines.append(f"{path}{name} {_type(field, version)}")
        if isinstance(field.kind, Struct | StructArray):
            lines += ours(field.kind.fields, version, f"{path}{name}.")
    return lines


def kafkas(version: str, work: Path) -> dict[tuple[int, int], list[str]]:
    libs = ArtifactCache(default_cache_dir()).fetch(kafka_jars(version))[0].parent
    classes = work / version
    subprocess.run(["javac", "-d", str(classes), "-cp", f"{libs}/*", str(SOURCE)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    printed = subprocess.run(["java", "-cp", f"{libs}/*:{classes}", "MetadataSchemas"],
                             check=True, capture_output=True, text=True, timeout=300).stdout  # fmt: skip
    schemas: dict[tuple[int, int], list[str]] = {}
    for line in printed.splitlines():
        key, record_version, rest = line.split(" ", 2)
        schemas.setdefault((int(key), int(record_version)), []).append(rest)
    return schemas


@pytest.mark.parametrize("kafka_version", [KAFKA_VERSION, KAFKA_4_VERSION])
def test_every_layout_is_the_schema_in_kafkas_jars(kafka_version: str, tmp_path: Path) -> None:
    theirs = kafkas(kafka_version, tmp_path)
    assert len(theirs) > 30
    for (api_key, version), fields in sorted(theirs.items()):
        layout = METADATA.get(api_key)
        assert layout is not None, f"apiKey {api_key} has no layout"
        low, high = layout.versions
        assert low <= version <= high, f"{layout.name} v{version} is not in our layouts"
        assert _lenient(ours(layout.fields, version), fields) == fields, f"{layout.name} v{version}"


def _lenient(mine: list[str], theirs: list[str]) -> list[str]:
    """Ours may take null where a Kafka version's generated code does not (Kafka 3.9.2 made
    PartitionRecord's ELR fields non-nullable, against its own spec): the reader accepts both."""
    return [
        m.replace("NULLABLE_", "") if m != t and m.replace("NULLABLE_", "") == t else m
        for m, t in zip(mine, theirs, strict=False)
    ] + mine[len(theirs) :]
