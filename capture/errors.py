"""Errors of the capture package."""

from zkcdc.ground.errors import ZkcdcError


class CaptureError(ZkcdcError):
    """Capture could not read, decode or deliver."""
