"""Errors of the capture package."""

from zkcdc.errors import ZkcdcError


class CaptureError(ZkcdcError):
    """Capture could not read, decode or deliver."""
