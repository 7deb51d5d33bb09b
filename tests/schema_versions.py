"""A schema folder as a later zkcdc will have it, to prove that today's records and logs stay
readable: today's releases plus a v2 of ChangeRecord that adds a field and an event type."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from zkcdc.ground.schema_files import current_schema, schema_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def later_schema_dir(target: Path) -> tuple[Path, dict[str, Any]]:
    """(the folder, for ZKCDC_SCHEMA_DIR; its ChangeRecord v2)."""
    folder = target / "avro"
    shutil.copytree(schema_dir(), folder)
    v2 = copy.deepcopy(current_schema("ChangeRecord"))
    v2["fields"].append({"name": "region", "type": ["null", "string"], "default": None})
    events = next(f for f in v2["fields"] if f["name"] == "events")["type"]["items"]
    types = next(f for f in events["fields"] if f["name"] == "type")["type"]
    types["symbols"].append("KRAFT_RECORD")
    later = len(list((folder / "history" / "ChangeRecord").glob("v*.avsc"))) + 1
    for file in (
        folder / "ChangeRecord.avsc",
        folder / "history" / "ChangeRecord" / f"v{later}.avsc",
    ):
        file.write_text(json.dumps(v2, indent=2))
    return folder, v2


def golden(name: str) -> list[dict[str, Any]]:
    """What zkcdc 57c99f2 made of the kept event log (tests/fixtures/event_log_v1.json)."""
    text = (FIXTURES / f"event_log_v1.{name}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]
