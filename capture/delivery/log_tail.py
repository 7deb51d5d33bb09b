"""The event log read forward from a seq while the capture goes on writing it: what Kafka has
not taken yet, read back as room comes (`kafka_feed`).

A tail remembers the file and the byte where its next block starts, so reaching the log's end
and reading on a turn later costs only the new blocks, never the file again from its start.
Finding the first record after a seq reads one record a block (the log is in seq order: a block
lies wholly before the seq when the next one starts at or before it), not every record before
it. Each step is a block (a thousand records at most, as the writer cuts them), so a reader in
the capture's loop never holds Python's lock (and kazoo's pings with it) for long."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro

from zkcdc.capture.delivery import log_blocks
from zkcdc.capture.delivery.event_log import first_seq, log_files
from zkcdc.capture.delivery.log_blocks import Damage, reason_of
from zkcdc.ground.schema_files import current_schema

Located = Iterator[tuple[int, Any, dict[str, Any], int]]


def _first_record_seq(block: Any) -> int:
    """The seq of a block's first record, the block left to be read whole afterwards."""
    seq = int(next(iter(block))["seq"])
    block.bytes_.seek(0)
    return seq


class LogTail:
    def __init__(
        self, directory: Path, cluster: str, after_seq: int, on_damage: Callable[[Damage], None]
    ) -> None:
        self._directory = directory
        self._cluster = cluster
        self._after = after_seq  # records up to it are left out (only while finding the start)
        self._on_damage = on_damage
        self._schema = fastavro.parse_schema(current_schema("ChangeRecord"), named_schemas={})
        self._file: Path | None = None
        self._start: int | None = None  # the byte of `_file` where the next block starts
        self._blocks: Located | None = None
        self._seeking = True
        self._held: Any = None  # while seeking: the block before the one being looked at
        self._ready: deque[dict[str, Any]] = deque()

    def take(self, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` records, in order, after those taken before; fewer (none) at the end
        of what the log holds now. A later call reads on from there."""
        while len(self._ready) < limit and self._read_block():
            pass
        count = min(limit, len(self._ready))
        return [self._ready.popleft() for _ in range(count)]

    def close(self) -> None:
        if self._blocks is not None:
            self._blocks.close()  # type: ignore[attr-defined]
            self._blocks = None

    def _read_block(self) -> bool:
        """One more block into `_ready` (or skipped); False at the end of the log as it is."""
        while True:
            if self._blocks is None and not self._open():
                return self._flush_held()
            assert self._blocks is not None
            located = next(self._blocks, None)
            if located is None:
                self._blocks = None
                if not self._next_file():
                    return self._flush_held()
                continue
            _, block, _, self._start = located
            try:
                if self._seeking:
                    self._seek_past(block)
                else:
                    self._ready.extend(log_blocks.block_records(block))
            except Exception as exc:
                self._on_damage(Damage(self._file or self._directory, -1, reason_of(exc)))
            return True

    def _seek_past(self, block: Any) -> None:
        """Finding the start: the block before this one is skipped whole if this one starts
        at or before the first seq wanted, else read (its later records kept) and the search
        ends there."""
        first = _first_record_seq(block)
        held, self._held = self._held, block
        if held is not None and first > self._after + 1:
            self._keep_after(held)
            self._seeking, self._held = False, None
            self._keep_after(block)

    def _flush_held(self) -> bool:
        """At the log's end while finding the start: the last block holds it, if anything."""
        if self._held is None:
            return False
        held, self._held = self._held, None
        try:
            self._keep_after(held)
        except Exception as exc:
            self._on_damage(Damage(self._file or self._directory, -1, reason_of(exc)))
        if self._ready:
            self._seeking = False
        return True

    def _keep_after(self, block: Any) -> None:
        self._ready.extend(r for r in log_blocks.block_records(block) if r["seq"] > self._after)

    def _open(self) -> bool:
        if self._file is None:
            if not self._directory.exists():
                return False
            files = log_files(self._directory, self._cluster)
            if not files:
                return False
            # The last file that begins at or before the first seq wanted (as records_after).
            self._file = files[0]
            for file in files:
                first = first_seq(file)
                if first is not None and first <= self._after + 1:
                    self._file = file
        self._blocks = log_blocks.located_blocks(
            self._file, self._on_damage, self._schema, self._start
        )
        return True

    def _next_file(self) -> bool:
        """On to the file after this one, if the writer began one (it never writes to this
        one again then). False: this is the newest; the next read goes on from `_start`."""
        files = log_files(self._directory, self._cluster)
        later = [f for f in files if self._file is None or f > self._file]
        if not later:
            return False
        self._file, self._start = later[0], None
        return True
