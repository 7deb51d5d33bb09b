"""What "nothing lost" means, checked on a capture's records: `seq` contiguous and each used once,
and every version of every znode either recorded or counted in `versions_skipped`.

Per path, each record must continue the previous one: its `before` is the last `after` (same
czxid, version and mzxid), an update's `versions_skipped` is exactly the versions between the
two, a create counts the versions it did not see; and the last record of a path holds the
version the writer left. A record lost after a crash breaks one of these."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

_STAT = ("czxid", "version", "mzxid")


def _stat(znode: dict[str, Any] | None) -> tuple[int, ...] | None:
    return None if znode is None else tuple(znode[k] for k in _STAT)


def account(
    records: Iterable[dict[str, Any]], final_versions: dict[str, int | None]
) -> dict[str, int]:
    """Fails on a gap, a duplicate or an unaccounted version; returns counts for the report:
    versions seen, reported skipped, and records."""
    records = list(records)
    seqs = [r["seq"] for r in records]
    assert seqs, "no records"
    duplicates = [s for s, n in Counter(seqs).items() if n > 1]
    assert not duplicates, f"seq used more than once: {duplicates[:10]}"
    expected = list(range(seqs[0], seqs[0] + len(seqs)))
    missing = sorted(set(expected) - set(seqs))
    assert seqs == expected, f"seq not contiguous: missing {missing[:10]} (of {len(missing)})"
    last: dict[str, dict[str, Any] | None] = {}
    seen = skipped = 0
    for r in records:
        if r["op"] == "HEARTBEAT":
            continue
        path, before, after = r["path"], r["before"], r["after"]
        where = f"seq {r['seq']} {r['op']} {path}"
        if r["op"] != "READ":
            assert _stat(before) == _stat(last.get(path)), (
                f"{where}: before {_stat(before)} is not the last recorded {_stat(last.get(path))}"
            )
        if r["op"] == "UPDATE":
            gap = after["version"] - before["version"] - 1
            assert r["versions_skipped"] == gap, (
                f"{where}: skipped {r['versions_skipped']} != {gap}"
            )
        elif r["op"] == "CREATE":
            assert r["versions_skipped"] == after["version"], f"{where}: unseen versions uncounted"
        elif r["op"] == "DELETE" and before is None:
            assert r["versions_skipped"] == 1, f"{where}: an unseen znode not counted"
        if after is not None:
            seen += 1
        skipped += r["versions_skipped"]
        last[path] = after
    for path, version in final_versions.items():
        got = last.get(path)
        have = None if got is None else got["version"]
        assert have == version, f"{path}: last recorded version {have}, the writer left {version}"
    return {"records": len(records), "versions_seen": seen, "versions_skipped": skipped}


def assert_each_once(records: Iterable[dict[str, Any]], logged: Iterable[dict[str, Any]]) -> None:
    """The topic holds each logged record exactly once (by seq), and nothing else."""
    on_topic = Counter(r["seq"] for r in records)
    twice = sorted(s for s, n in on_topic.items() if n > 1)
    assert not twice, f"{len(twice)} records on the topic twice, e.g. seq {twice[:10]}"
    in_log = {r["seq"] for r in logged}
    assert set(on_topic) == in_log, (
        f"topic and log differ: only on the topic {sorted(set(on_topic) - in_log)[:10]}, "
        f"only in the log {sorted(in_log - set(on_topic))[:10]}"
    )
