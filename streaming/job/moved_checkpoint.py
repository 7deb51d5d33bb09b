"""A checkpoint moved to another folder (restored from a backup, copied to a new host) resumes
where it now is.

Spark's stateful operators of the sharded layout (transformWithStateInPandas) name their state
schema files by absolute path, in the operator metadata (`state/<op>/_metadata/v2/<batch>`:
a line `v2`, then JSON whose `stateStoreInfo[].stateSchemaFilePaths` list them). Moved, such
a checkpoint names files in the folder it came from, and Spark fails the query reading them.
Before the query starts, each path that names a file missing there, but present at the same
place in this checkpoint, is pointed at this checkpoint's copy. Paths that still resolve,
and checkpoints of the one-group layout (no such metadata), are left as they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_LOCAL = "file:"
_SCHEMAS = "_stateSchema"


def repoint_state_schemas(query_checkpoint: Path) -> list[Path]:
    """Points the state schema paths of `query_checkpoint`'s operator metadata that name a
    missing file at this checkpoint's copy of it; returns the metadata files rewritten."""
    rewritten = []
    for metadata in sorted(query_checkpoint.glob("state/*/_metadata/v2/*")):
        if metadata.name.startswith(".") or not metadata.is_file():
            continue
        try:
            version, _, body = metadata.read_text().partition("\n")
            content = json.loads(body)
        except ValueError:
            continue  # not ours to judge: Spark says what it cannot read
        if _repoint(content, query_checkpoint):
            metadata.write_text(f"{version}\n{json.dumps(content, separators=(',', ':'))}")
            # Hadoop's checksum beside it is of the old text: without one, the file is read.
            (metadata.parent / f".{metadata.name}.crc").unlink(missing_ok=True)
            rewritten.append(metadata)
    return rewritten


def _repoint(content: Any, query_checkpoint: Path) -> bool:
    changed = False
    for store in content.get("stateStoreInfo", ()) if isinstance(content, dict) else ():
        paths = store.get("stateSchemaFilePaths") if isinstance(store, dict) else None
        if not isinstance(paths, list):
            continue
        for i, path in enumerate(paths):
            here = _here(path, query_checkpoint)
            if here is not None:
                paths[i] = f"{_LOCAL}{here}"
                changed = True
    return changed


def _here(path: Any, query_checkpoint: Path) -> Path | None:
    """This checkpoint's copy of the schema file `path` names, if `path` is a local file
    that is missing and the copy exists."""
    if not isinstance(path, str) or not path.startswith(_LOCAL):
        return None
    named = Path(path.removeprefix(_LOCAL))
    if named.exists():
        return None
    # The part from `state/<op>/_stateSchema/` on, as Spark lays it out in every checkpoint.
    parts = named.parts
    starts = [i for i in range(len(parts) - 2) if parts[i] == "state" and parts[i + 2] == _SCHEMAS]
    if not starts:
        return None
    copy = query_checkpoint.joinpath(*parts[starts[-1] :])
    return copy if copy.is_file() else None
