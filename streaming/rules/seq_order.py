"""One cluster's change records put back in `seq` order, whatever batches they come in.

The changes topic spreads a cluster's records over its partitions (the key is cluster +
path). Capture produces them in seq order, so within one partition seqs only grow; across
partitions, a reader of a backlog advances the partitions unevenly. A record therefore waits
here until every record before it has come or is known never to come, and then only.

**The watermark.** For each partition of the source, the highest seq read from it so far
(`heads`). Whatever that partition still holds has a higher seq, so no seq at or below the
lowest head of all the partitions can still come: a seq missing below it is a real gap
(a dead letter, a record the topic's retention took), and the records after it go on. Capture
sends a heartbeat to every partition each heartbeat interval (`publisher.heartbeat_partition`),
so every head keeps moving even where a partition's znodes are quiet.

The order records are placed in is then the seq order of the records the source holds, the
duplicates left out: the same sequence for a backlog read in batches of one record, a replay
of the event log in one batch, or a job killed and resumed at any micro-batch. The alerts,
a function of that sequence, are the same too.

**A partition that says nothing.** A topic written by something that does not send those
heartbeats (an older capture, a replay into a topic of more partitions than the log's
capture wrote) may leave a partition with nothing of this cluster for good. A partition that
brought none of this cluster's records in its last `SILENT_BATCHES` turns here, while the
others moved `silent_ms` of event time past the last it brought, is left out of the
watermark until it brings one again. A gap passed that way is counted as `unproven`, and a
record that still comes after its place was passed is counted as `unplaced` (never fed to the
engine: its alerts would depend on when it came); both are reported per micro-batch
(`SeqOrder.take_report`).

Pure: no Spark, no Kafka. The job (`streaming/job/alert_job.py`) keeps one per cluster (and
shard) in Spark's state store."""

from __future__ import annotations

from dataclasses import dataclass, field

# (ts_ms, op, path, events as JSON text): what a waiting record keeps.
Waiting = tuple[int, str, str, str]

SILENT_MS = 60_000  # event time a silent partition may lag the others before it is left out
SILENT_BATCHES = 2  # ... and the turns it must have brought nothing of this cluster in
KEPT_GAPS = 1_000  # the gaps passed that a late record is recognised by (the newest kept)
FIRST_SEQ = 1  # capture's first record of a lineage


@dataclass
class OrderReport:
    """What one turn placed, waited for and could not place (for the job's metrics)."""

    gaps: int = 0  # missing seqs passed, each known never to come
    unproven: int = 0  # missing seqs passed past a silent partition
    unplaced: int = 0  # records that came after their place was passed: dropped, counted
    duplicates: int = 0  # records seen before (a re-read, a capture's resend)
    waiting: int = 0  # records waiting after the turn

    def __bool__(self) -> bool:
        return bool(self.gaps or self.unproven or self.unplaced or self.duplicates)


@dataclass
class SeqOrder:
    """The waiting records of one cluster and each source partition's head."""

    partitions: int = 1  # the source's partitions: each is waited for, seen or not
    silent_ms: int = SILENT_MS
    pending: dict[int, Waiting] = field(default_factory=dict)
    heads: dict[int, int] = field(default_factory=dict)  # partition -> highest seq read
    head_ts: dict[int, int] = field(default_factory=dict)  # partition -> its newest ts read
    heard: dict[int, int] = field(default_factory=dict)  # partition -> the turn it last brought
    turn: int = 0
    newest_ts: int = 0
    first_ts: int | None = None  # the event time this order began at
    passed: list[tuple[int, int]] = field(default_factory=list)  # gaps passed: (first, last)
    report: OrderReport = field(default_factory=OrderReport)

    def add(self, seq: int, partition: int, waiting: Waiting, placed_through: int) -> None:
        """A record read from `partition`; `placed_through`: the last seq placed so far."""
        ts = waiting[0]
        if self.first_ts is None:
            self.first_ts = ts
        self.newest_ts = max(self.newest_ts, ts)
        if seq > self.heads.get(partition, -1):
            self.heads[partition] = seq
            self.head_ts[partition] = max(self.head_ts.get(partition, ts), ts)
        self.heard[partition] = self.turn
        if seq <= placed_through:
            if self._in_passed_gap(seq):
                self.report.unplaced += 1
            else:
                self.report.duplicates += 1
            return
        if seq in self.pending:
            self.report.duplicates += 1
        self.pending[seq] = waiting

    def ready(self, placed_through: int) -> list[tuple[int, Waiting]]:
        """The waiting records that may be placed now, in seq order, taken out of the wait;
        `placed_through`: the last seq placed so far. One call a turn (a micro-batch)."""
        self.turn += 1
        out: list[tuple[int, Waiting]] = []
        if not self.pending:
            return out
        mark, proven = self.watermark()
        last = placed_through
        for seq in sorted(self.pending):
            expected = FIRST_SEQ if last < 0 else last + 1
            if seq > expected:
                if seq - 1 > mark:
                    break  # an earlier record may still come
                if last >= 0:
                    # Past `proven` only because a silent partition was left out of the mark.
                    self._pass_gap(expected, seq - 1, unproven=seq - 1 > proven)
            out.append((seq, self.pending.pop(seq)))
            last = seq
        return out

    def watermark(self) -> tuple[int, int]:
        """(the highest seq below which nothing more is waited for, silent partitions left
        out; the same over every partition, below which nothing more can come)."""
        every = set(range(self.partitions)) | set(self.heads)
        heard = [self.heads.get(p, -1) for p in every if not self._silent(p)]
        proven = min((self.heads.get(p, -1) for p in every), default=-1)
        if not heard:  # every partition silent: the newest read is the mark
            return max(self.heads.values(), default=-1), proven
        return min(heard), proven

    def take_report(self) -> OrderReport:
        report = self.report
        report.waiting = len(self.pending)
        self.report = OrderReport()
        return report

    def _silent(self, partition: int) -> bool:
        heard = self.heard.get(partition)
        if heard is not None and self.turn - heard <= SILENT_BATCHES:
            return False
        since = self.head_ts.get(partition, self.first_ts)
        return since is not None and self.newest_ts - since >= self.silent_ms

    def _pass_gap(self, first: int, last: int, unproven: bool) -> None:
        count = last - first + 1
        if unproven:
            self.report.unproven += count
        else:
            self.report.gaps += count
        self.passed.append((first, last))
        del self.passed[:-KEPT_GAPS]

    def _in_passed_gap(self, seq: int) -> bool:
        for i, (first, last) in enumerate(self.passed):
            if first <= seq <= last:
                # Counted once: the seq's place is taken off the gap.
                self.passed[i : i + 1] = [
                    r for r in ((first, seq - 1), (seq + 1, last)) if r[0] <= r[1]
                ]
                return True
        return False
