"""Where the Avro schemas (`avro/*.avsc`) are: capture encodes with them, Spark decodes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def schema_dir() -> Path:
    """`avro/` of the source tree, else the copy a wheel install put under `share/zkcdc/avro`;
    `ZKCDC_SCHEMA_DIR` over both."""
    if configured := os.environ.get("ZKCDC_SCHEMA_DIR"):
        return Path(configured)
    source_tree = Path(__file__).resolve().parents[2] / "avro"
    if source_tree.is_dir():
        return source_tree
    return Path(sys.prefix) / "share" / "zkcdc" / "avro"


def released_versions(name: str) -> list[tuple[int, dict[str, Any]]]:
    """Every released version of `avro/<name>.avsc`, oldest first: `avro/history/<name>/vN.avsc`
    (avro/README.md says when a version is added)."""
    folder = schema_dir() / "history" / name
    found = []
    for file in folder.glob("v*.avsc"):
        number = file.stem[1:]
        if number.isdigit():
            found.append((int(number), json.loads(file.read_text())))
    return sorted(found, key=lambda version: version[0])


def current_text(name: str) -> str:
    """`avro/<name>.avsc` as the file holds it."""
    return (schema_dir() / f"{name}.avsc").read_text()


def current_schema(name: str) -> Any:
    return json.loads(current_text(name))
