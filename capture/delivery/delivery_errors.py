"""The delivery side's own error, apart so that the publisher and its transactions share it."""

from __future__ import annotations

from zkcdc.capture.errors import CaptureError


class DeliveryError(CaptureError):
    """Kafka refused records for good (not a broker being away)."""
