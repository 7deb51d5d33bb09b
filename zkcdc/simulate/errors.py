"""The simulator's one root error."""

from zkcdc.ground.errors import ZkcdcError


class SimulateError(ZkcdcError):
    """Bad input or a cluster the simulator cannot work on; the CLI prints it on one line."""
