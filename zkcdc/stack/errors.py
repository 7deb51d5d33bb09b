"""Errors of the local stack."""

from zkcdc.ground.errors import ZkcdcError


class StackError(ZkcdcError):
    """The local stack could not be fetched, started, inspected or stopped."""
