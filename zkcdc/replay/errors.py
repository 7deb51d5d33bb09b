from zkcdc.ground.errors import ZkcdcError


class ReplayError(ZkcdcError):
    """A replay that cannot go on: an unreadable log, Kafka refusing records."""
