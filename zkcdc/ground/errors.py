"""The root of every error zkcdc reports to a user as one line."""


class ZkcdcError(Exception):
    """An expected failure: the CLI prints its message on one line and exits non-zero."""

    exit_code = 1
