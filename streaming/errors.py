"""The streaming package's one root error."""

from zkcdc.ground.errors import ZkcdcError


class StreamingError(ZkcdcError):
    """Bad input or settings for a streaming job; the CLI prints it on one line."""
