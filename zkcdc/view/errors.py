from zkcdc.ground.errors import ZkcdcError


class ViewError(ZkcdcError):
    """A view that cannot be shown: no such topic, an unreadable log, a port taken."""
