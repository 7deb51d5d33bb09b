"""Where the Avro schemas (`avro/*.avsc`) are: capture encodes with them, Spark decodes."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def schema_dir() -> Path:
    """`avro/` of the source tree, else the copy a wheel install put under `share/zkcdc/avro`;
    `ZKCDC_SCHEMA_DIR` over both."""
    if configured := os.environ.get("ZKCDC_SCHEMA_DIR"):
        return Path(configured)
    source_tree = Path(__file__).resolve().parents[2] / "avro"
    if source_tree.is_dir():
        return source_tree
    return Path(sys.prefix) / "share" / "zkcdc" / "avro"
