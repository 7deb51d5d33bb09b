"""`zkcdc events cat` filters and `zkcdc events stats` over event logs written by the daemon's
own writer, through the command line as users run it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from zkcdc.capture.delivery.event_log import EventLogWriter, log_files
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.record_filter import RecordFilter, parse_time
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
from zkcdc.cli import main
from zkcdc.ground.change_types import EventType, Op

T0 = 1_795_000_000_000
STATE = "/brokers/topics/t/partitions/0/state"


def record(cluster: str, seq: int, ts: int, op: Op, path: str, *events: ClusterEvent,
           skipped: int = 0) -> dict:  # fmt: skip
    after = None if op in (Op.DELETE, Op.HEARTBEAT) else Znode(b"{}", 1, 2, 3, 4, 5, 0)
    return ChangeRecord(cluster, seq, op, path, None, after, None, ts, ts,
                        versions_skipped=skipped, events=tuple(events)).to_avro()  # fmt: skip


def shrink() -> ClusterEvent:
    return ClusterEvent(type=EventType.ISR_SHRUNK, topic="t", partition=0, leader=1,
                        isr_before=(1, 2), isr_after=(1,), removed=(2,))  # fmt: skip


@pytest.fixture
def log(tmp_path):
    for cluster in ("c1", "c2"):
        writer = EventLogWriter(tmp_path, cluster, now=lambda: 0.0)
        writer.append([
            record(cluster, 1, T0, Op.READ, "/brokers/ids/1",
                   ClusterEvent(type=EventType.BROKER_REGISTERED, broker_id=1)),
            record(cluster, 2, T0 + 1000, Op.UPDATE, STATE, shrink(), skipped=2),
            record(cluster, 3, T0 + 2000, Op.HEARTBEAT, ""),
            record(cluster, 4, T0 + 3000, Op.DELETE, "/brokers/ids/1",
                   ClusterEvent(type=EventType.BROKER_DEREGISTERED, broker_id=1)),
        ])  # fmt: skip
        writer.close()
    return tmp_path


def cat(log, *args: str) -> list[tuple[str, int]]:
    result = CliRunner().invoke(main, ["events", "cat", "--json", str(log), *args])
    assert result.exit_code == 0, result.output
    return [(r["cluster"], r["seq"]) for r in map(json.loads, result.output.splitlines())]


def test_cat_filters_by_path_prefix_type_time_and_cluster(log):
    assert cat(log, "--path-prefix", "/brokers/topics") == [("c1", 2), ("c2", 2)]
    assert cat(log, "--type", EventType.ISR_SHRUNK, "--cluster", "c2") == [("c2", 2)]
    assert cat(log, "--type", "delete", "--type", "HEARTBEAT", "--cluster", "c1") == [
        ("c1", 3), ("c1", 4)]  # fmt: skip
    since, until = str(T0 + 1000), "2026-11-18T11:06:43Z"  # = T0 + 3000, excluded
    assert parse_time(until) == T0 + 3000
    assert cat(log, "--since", since, "--until", until, "--cluster", "c1") == [("c1", 2), ("c1", 3)]


def test_bad_times_are_one_line_errors():
    result = CliRunner().invoke(main, ["events", "cat", ".", "--since", "yesterday"])
    assert result.exit_code != 0 and "not a time: 'yesterday'" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(CaptureError, match="--until must be later"):
        RecordFilter(since_ms=5, until_ms=5)


def test_stats_counts_ops_events_time_span_and_skips_per_cluster(log):
    result = CliRunner().invoke(main, ["events", "stats", "--json", str(log)])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["records"] == 8
    assert stats["clusters"]["c1"] == {"records": 4, "first_seq": 1, "last_seq": 4}
    assert stats["ops"] == {"DELETE": 2, "HEARTBEAT": 2, "READ": 2, "UPDATE": 2}
    assert (
        stats["events"][EventType.ISR_SHRUNK] == 2
        and stats["events"][EventType.BROKER_REGISTERED] == 2
    )
    assert (stats["first_ts_ms"], stats["last_ts_ms"]) == (T0, T0 + 3000)
    assert stats["versions_skipped"] == 4 and stats["records_with_skips"] == 2
    text = CliRunner().invoke(main, ["events", "stats", str(log), "--cluster", "c1"]).output
    assert "records: 4" in text and "(3.0 s)" in text and "versions skipped: 2" in text


def test_stats_of_a_damaged_log_still_counts_the_valid_part_and_exits_non_zero(log):
    file = next(f for f in log_files(log) if f.name.startswith("c2"))
    file.write_bytes(file.read_bytes()[:-20])
    result = CliRunner().invoke(main, ["events", "stats", "--json", str(log)])
    assert result.exit_code == 1
    out, err = result.stdout, result.stderr
    assert json.loads(out)["clusters"]["c1"]["records"] == 4
    assert "damaged at block" in err and file.name in err
