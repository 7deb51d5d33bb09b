"""How long a command waits for Kafka or ZooKeeper to answer before it says it is unreachable:
one setting for every command, `ZKCDC_CONNECT_TIMEOUT_S` (capture also reads it through its own
settings, as `connect_timeout_s`). Tests set it small; the defaults stay as they are."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from zkcdc.ground.errors import ZkcdcError

ENV = "ZKCDC_CONNECT_TIMEOUT_S"
DEFAULT_S = 30.0


class ConnectTimeoutError(ZkcdcError):
    """ZKCDC_CONNECT_TIMEOUT_S is not a positive number of seconds."""


def connect_timeout_s(
    default_s: float = DEFAULT_S, environ: Mapping[str, str] = os.environ
) -> float:
    """`ZKCDC_CONNECT_TIMEOUT_S` when set, else `default_s`."""
    given = environ.get(ENV, "").strip()
    if not given:
        return default_s
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConnectTimeoutError(f"{ENV}={given!r} is not a positive number of seconds")
    return value
