"""Sequential notification znodes brokers write for the controller: ISR changes, log-dir failures."""

from __future__ import annotations

from zkcdc.capture.decoders import admin
from zkcdc.capture.decoders.json_data import integer, json_object
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType

LOG_DIR_FAILURE = 1  # LogDirEventNotificationHandler.LogDirFailureEvent


def decode_isr_change(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    if after is None or before is not None:
        return []  # the controller deleting a handled notification says nothing new
    return [
        ClusterEvent(type=EventType.ISR_CHANGE_NOTIFIED, partitions=admin.partitions(after, False))
    ]


def decode_log_dir_event(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    if after is None or before is not None:
        return []
    obj = json_object(after)
    if integer(obj, "event", LOG_DIR_FAILURE) != LOG_DIR_FAILURE:
        return []
    return [ClusterEvent(type=EventType.LOG_DIR_FAILED, broker_id=integer(obj, "broker"))]
