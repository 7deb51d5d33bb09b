"""Whether Spark can resume a streaming query from the files of its checkpoint, asked before
Spark starts.

Spark reads a checkpoint's files deep inside its start or its first micro-batch, and a damaged
one surfaces there as a stack trace or a line that names nothing ("Input length = 1", "An
error occurred during loading state"). The files a resume reads are checked here first, each
as Spark writes it, so a damaged checkpoint is refused in one line that names the file and
says what to do. What is checked:
- that the logs a resume reads together are there together (a committed micro-batch's
  offsets, a planned one's sources, the query's id);
- `metadata`: the query's id, JSON;
- `offsets/` and `commits/`: the entries a resume reads (the last two planned micro-batches,
  the last committed one): a version line (`v1`), then JSON lines (`-` for a source with none);
- `sources/<n>/`: each source's newest entry (a file source's list of files read, a Kafka
  source's first offsets), the same form;
- a stateful query's `state/` once a micro-batch was committed; in each operator its newest
  metadata entry, a folder holding state for each store partition it counts, its schema
  files, and in each store partition the newest RocksDB snapshot (`<version>.zip`) at or below
  the committed version: a whole zip whose file list names SST files that are there at the
  size it says.
- that the job's sink ledger names no micro-batch the query never planned (the query's
  checkpoint removed or replaced beside it): the new query's micro-batches would be taken for
  delivered ones and their alerts dropped.
RocksDB's changelog files and the SST files' insides are left to Spark (the query's failure is
then said in one line too: query_failures.py).

Reads files, starts nothing."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from zkcdc.streaming.errors import StreamingError

_VERSION_LINE = re.compile(r"v\d+")
_ENTRY = re.compile(r"\d+(\.compact)?")
# A schema file of Spark 4's state (StateSchemaV3File): Java's writeUTF of its version, "v3".
_BINARY_VERSION = re.compile(rb"\x00[\x02-\x04]v\d+")


def damage(query_checkpoint: Path, stateful: bool = True) -> str | None:
    """What in `query_checkpoint` Spark could not read back ("offsets/7: not JSON"), or None
    when every file a resume reads is whole. A new checkpoint (no files yet) has none."""
    checks = [_logs_together, _metadata, _offsets, _commits, _sources]
    if stateful:
        checks.append(_state)
    for check in checks:
        found = check(query_checkpoint)
        if found is not None:
            return found
    return None


def delivered_unplanned(query_checkpoint: Path, delivered: int) -> str | None:
    """Whether the sink ledger (`delivered`: the last micro-batch every sink took, -1 for
    none) names a micro-batch the query never planned: the query's checkpoint removed or
    replaced beside its ledger. Spark would number the new query's micro-batches from 0 again,
    and each up to `delivered` would be taken for delivered before and its alerts dropped."""
    if delivered < 0:
        return None
    planned = entries(query_checkpoint / "offsets")
    last = int(planned[-1].name.split(".")[0]) if planned else None
    if last is not None and last >= delivered:
        return None
    since = "has no offsets log" if last is None else f"planned up to micro-batch {last}"
    return (
        f"sink-ledger: says micro-batch {delivered} was delivered, but "
        f"{query_checkpoint.name}/ {since} (the query's checkpoint removed or replaced), so its "
        f"micro-batches up to {delivered} would be taken for delivered and their alerts dropped"
    )


def refuse_if_damaged(
    checkpoint: Path,
    queries: Iterable[Path],
    afresh: str,
    stateful: bool = True,
    delivered: int = -1,
) -> None:
    """Refuses `checkpoint` in one line when a query checkpoint of it (`queries`) has
    `damage`, or its sinks' ledger names a micro-batch it never planned (`delivered`:
    `delivered_unplanned`), with `afresh`: how to start its job afresh."""
    for query in queries:
        found = damage(query, stateful) or delivered_unplanned(query, delivered)
        if found is not None:
            raise StreamingError(f"checkpoint {checkpoint} cannot be resumed: {found}; {afresh}")


def _logs_together(root: Path) -> str | None:
    """The query's logs that come with one another: committed micro-batches were planned
    (offsets), planned ones read a source (sources) of a query with an id (metadata)."""
    planned, committed = entries(root / "offsets"), entries(root / "commits")
    if committed and not planned:
        return f"offsets/: missing, though the query committed micro-batch {committed[-1].name}"
    if planned and not any(entries(s) for s in _folders(root / "sources")):
        return f"sources/: missing, though the query planned micro-batch {planned[-1].name}"
    if (planned or committed) and not (root / "metadata").is_file():
        return "metadata: missing, though the query planned micro-batches"
    return None


def _folders(folder: Path) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []


def _text(path: Path) -> str:
    """A file's text; ValueError if it is not UTF-8 (binary garbage)."""
    return path.read_bytes().decode("utf-8")


def _named(path: Path, root: Path) -> str:
    return str(path.relative_to(root))


def _metadata(root: Path) -> str | None:
    path = root / "metadata"
    if not path.is_file():
        return None
    try:
        content = json.loads(_text(path))
    except (OSError, ValueError) as exc:
        return f"metadata: not the query's id ({_why(exc)})"
    if not isinstance(content, dict) or not isinstance(content.get("id"), str):
        return 'metadata: not the query\'s id (no "id")'
    return None


def entries(folder: Path) -> list[Path]:
    """A metadata log's entries, oldest first (Spark's own temporary and checksum files
    aside)."""
    if not folder.is_dir():
        return []
    found = [f for f in folder.iterdir() if _ENTRY.fullmatch(f.name) and f.is_file()]
    return sorted(found, key=lambda f: int(f.name.split(".")[0]))


def last_planned(query_checkpoint: Path) -> list[str]:
    """The lines of the query's newest offsets entry: its version line, its metadata (the
    session's conf among it), then each source's offsets. No lines where it planned nothing
    or the entry cannot be read (`damage` names it)."""
    planned = entries(query_checkpoint / "offsets")
    if not planned:
        return []
    try:
        return _text(planned[-1]).splitlines()
    except (OSError, ValueError):
        return []


def _log_entry(path: Path, root: Path, lines_after: int | None = None) -> str | None:
    """A metadata log entry: a version line, then JSON lines (at least `lines_after` of them
    when given); "-" stands for a source with no offset."""
    try:
        text = _text(path).lstrip("\x00")  # a Kafka source's first offsets begin with one
    except (OSError, ValueError) as exc:
        return f"{_named(path, root)}: {_why(exc)}"
    lines = text.splitlines()
    if not lines or not _VERSION_LINE.fullmatch(lines[0].strip()):
        return f"{_named(path, root)}: no version line (v1) at its start"
    rest = [line for line in lines[1:] if line.strip()]
    if lines_after is not None and len(rest) < lines_after:
        return f"{_named(path, root)}: cut short"
    for line in rest:
        if line.strip() == "-":
            continue
        try:
            json.loads(line)
        except ValueError as exc:
            return f"{_named(path, root)}: a line is not JSON ({_why(exc)})"
    return None


def _offsets(root: Path) -> str | None:
    for entry in entries(root / "offsets")[-2:]:
        found = _log_entry(entry, root, lines_after=1)
        if found is not None:
            return found
    return None


def _commits(root: Path) -> str | None:
    committed = entries(root / "commits")
    return _log_entry(committed[-1], root, lines_after=1) if committed else None


def _sources(root: Path) -> str | None:
    for source in _folders(root / "sources"):
        logged = entries(source)
        if logged:
            found = _log_entry(logged[-1], root)
            if found is not None:
                return found
    return None


def _committed_version(root: Path) -> int | None:
    """The state version a resume loads: the last committed micro-batch's id + 1."""
    committed = entries(root / "commits")
    return int(committed[-1].name) + 1 if committed else None


def _state(root: Path) -> str | None:
    version = _committed_version(root)
    if version is None:
        return None
    folder = root / "state"
    operators = [d for d in folder.iterdir() if d.is_dir()] if folder.is_dir() else []
    if not operators:
        return f"state/: missing, though the query committed micro-batch {version - 1}"
    for operator in sorted(operators):
        found = _operator(operator, root, version)
        if found is not None:
            return found
    return None


def _operator(operator: Path, root: Path, version: int) -> str | None:
    metadata = entries(operator / "_metadata" / "v2")
    if metadata:
        found = _log_entry(metadata[-1], root, lines_after=1) or _store_partitions(
            metadata[-1], operator, root
        )
        if found is not None:
            return found
    elif not (operator / "_metadata" / "metadata").is_file():
        return (
            f"{_named(operator, root)}/_metadata/: missing, though the query committed "
            f"micro-batch {version - 1}"
        )
    for schema in sorted((operator / "_stateSchema").rglob("*")):
        if schema.is_file() and not schema.name.startswith("."):
            found = _schema(schema, root)
            if found is not None:
                return found
    for partition in sorted(operator.iterdir()):
        if partition.is_dir() and partition.name.isdigit():
            found = _snapshot(partition, root, version)
            if found is not None:
                return found
    return None


def _store_partitions(metadata: Path, operator: Path, root: Path) -> str | None:
    """The schema files the operator's metadata names are there, and each store partition it
    counts has its folder, with a changelog or a snapshot in it: every task of a committed
    micro-batch writes one."""
    try:
        info = json.loads(_text(metadata).splitlines()[1])
        counts = {int(store["numPartitions"]) for store in info["stateStoreInfo"]}
        schemas = [p for s in info["stateStoreInfo"] for p in s.get("stateSchemaFilePaths", [])]
    except (OSError, ValueError, IndexError, KeyError, TypeError, AttributeError) as exc:
        return f"{_named(metadata, root)}: not the operator's metadata ({_why(exc)})"
    for named in schemas:
        # By absolute path, from wherever the checkpoint was written: the same file under
        # this one's operator is what a resume reads (moved_checkpoint.py points it there).
        _, mark, tail = str(named).partition("/_stateSchema/")
        if mark and not (operator / "_stateSchema" / tail).is_file():
            return (
                f"{_named(operator, root)}/_stateSchema/{tail}: missing "
                f"({_named(metadata, root)} names it)"
            )
    for partition in range(max(counts, default=0)):
        folder = operator / str(partition)
        if not any(f.suffix in (".changelog", ".zip") for f in _files(folder)):
            return (
                f"{_named(folder, root)}/: no state, though {_named(metadata, root)} counts "
                f"{max(counts)} store partitions"
            )
    return None


def _files(folder: Path) -> list[Path]:
    return [f for f in folder.iterdir() if f.is_file()] if folder.is_dir() else []


def _schema(path: Path, root: Path) -> str | None:
    try:
        head = path.read_bytes()[:8]
    except OSError as exc:
        return f"{_named(path, root)}: {_why(exc)}"
    if _BINARY_VERSION.match(head) or _VERSION_LINE.match(head.decode("latin-1")):
        return None
    return f"{_named(path, root)}: not a state schema (no version at its start)"


def _snapshot(partition: Path, root: Path, version: int) -> str | None:
    """The newest RocksDB snapshot a resume at `version` starts from: a whole zip, its SST
    files there at the sizes its file list gives."""
    zips = [f for f in partition.glob("*.zip") if f.stem.isdigit() and int(f.stem) <= version]
    if not zips:
        return None  # the store's changelog alone: Spark replays it
    newest = max(zips, key=lambda f: int(f.stem))
    name = _named(newest, root)
    try:
        with zipfile.ZipFile(newest) as archive:
            broken = archive.testzip()
            if broken is not None:
                return f"{name}: {broken} in it is damaged"
            listing = archive.read("metadata").decode("utf-8").splitlines()
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        return f"{name}: not a whole RocksDB snapshot ({_why(exc)})"
    try:
        files = json.loads(listing[1])["sstFiles"]
        expected = {f["dfsSstFileName"]: int(f["sizeBytes"]) for f in files}
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        return f"{name}: its file list is not readable ({_why(exc)})"
    for sst, size in sorted(expected.items()):
        path = partition / "SSTs" / sst
        if not path.is_file():
            return f"{_named(path, root)}: missing ({name} names it)"
        if path.stat().st_size != size:
            return f"{_named(path, root)}: {path.stat().st_size} bytes, {name} says {size}"
    return None


def _why(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not text"
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
