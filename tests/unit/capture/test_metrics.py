"""The capture's Prometheus counters, as a scrape would read them."""

from __future__ import annotations

from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
from zkcdc.ground.change_types import EventType, Op


def _record(seq: int, op: Op, events: tuple[ClusterEvent, ...], skipped: int = 0) -> ChangeRecord:
    after = Znode(b"{}", version=seq)
    return ChangeRecord("c", seq, op, "/p", None, after, seq, seq, seq, skipped, events=events)


def test_a_batch_of_records_counts_each_op_event_type_and_skipped_version():
    metrics = CaptureMetrics()
    shrunk = ClusterEvent(type=EventType.ISR_SHRUNK, topic="t", partition=0)
    bumped = ClusterEvent(type=EventType.LEADER_EPOCH_BUMPED, topic="t", partition=0)
    metrics.given_out([
        _record(1, Op.CREATE, ()),
        _record(2, Op.UPDATE, (shrunk, bumped), skipped=2),
        _record(3, Op.UPDATE, (shrunk,)),
    ])  # fmt: skip
    metrics.given_out([_record(4, Op.UPDATE, (shrunk,), skipped=1)])
    value = metrics.registry.get_sample_value
    assert value("zkcdc_capture_records_total", {"op": "CREATE"}) == 1
    assert value("zkcdc_capture_records_total", {"op": "UPDATE"}) == 3
    assert value("zkcdc_capture_events_total", {"type": EventType.ISR_SHRUNK}) == 3
    assert value("zkcdc_capture_events_total", {"type": EventType.LEADER_EPOCH_BUMPED}) == 1
    assert value("zkcdc_capture_versions_skipped_total") == 3
    assert value("zkcdc_capture_seq") == 4
