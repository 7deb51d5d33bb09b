"""Named failpoints: where tests make capture fail at a chosen step of a turn, in the real process.

`ZKCDC_FAILPOINTS="event_log.fsync=3:raise;kafka.ack=10:kill"` arms points by name: on its Nth
hit a point raises an `OSError` (`raise`: EIO, `enospc`: ENOSPC), kills the process with
SIGKILL (`kill`), or, at `kafka.commit`, makes the producer lost (`lose`: as librdkafka's fatal
error after every broker restarted; the daemon goes on with a new producer). Unarmed (every production run), a hit is one dict test.

The points, in the order a turn reaches them:
- `tracker.record`: a record was made (seq and known tree advanced), nothing logged yet;
- `event_log.write`: before a block is written; `event_log.fsync`: written, before its fsync;
- `kafka.produce`: logged, before the records are handed to the producer;
- `kafka.ack`: Kafka acknowledged a record, before the daemon takes note;
- `kafka.commit`: a transaction's records produced, before its commit is asked for;
  `kafka.committed`: committed, before the daemon takes note;
- `checkpoint.tree`, `checkpoint.delivered`: a checkpoint file written, before it replaces the
  last one;
- `decoder`: inside a decoder (the record must still be made, with an UNPARSEABLE event)."""

from __future__ import annotations

import errno
import os
import signal

from zkcdc.capture.errors import CaptureError

ENV = "ZKCDC_FAILPOINTS"
ACTIONS = ("raise", "enospc", "kill", "lose")
NAMES = (
    "tracker.record",
    "event_log.write",
    "event_log.fsync",
    "kafka.produce",
    "kafka.ack",
    "kafka.commit",
    "kafka.committed",
    "checkpoint.tree",
    "checkpoint.delivered",
    "decoder",
)

_armed: dict[str, tuple[int, str]] = {}
_hits: dict[str, int] = {}


class FailpointError(CaptureError):
    """ZKCDC_FAILPOINTS names an unknown point or action."""


class ProducerLost(CaptureError):
    """`lose`: the publisher takes it as its producer lost (a fatal librdkafka error)."""


def parse(spec: str) -> dict[str, tuple[int, str]]:
    armed = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        name, _, rest = item.partition("=")
        count, _, action = rest.partition(":")
        lose_elsewhere = action == "lose" and name != "kafka.commit"
        if (
            name not in NAMES
            or action not in ACTIONS
            or lose_elsewhere
            or not count.isdigit()
            or int(count) < 1
        ):
            raise FailpointError(
                f"{ENV}: {item!r} is not NAME=N:ACTION (names: {', '.join(NAMES)}; "
                f"actions: {', '.join(ACTIONS)}; lose at kafka.commit only)"
            )
        armed[name] = (int(count), action)
    return armed


def arm(spec: str) -> None:
    """Arms the points `spec` names (and disarms the others); counts start again."""
    _armed.clear()
    _hits.clear()
    _armed.update(parse(spec))


def hit(name: str) -> None:
    if not _armed or name not in _armed:
        return
    count = _hits[name] = _hits.get(name, 0) + 1
    at, action = _armed[name]
    if count != at:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "lose":
        raise ProducerLost(f"the producer was lost (failpoint {name})")
    code = errno.ENOSPC if action == "enospc" else errno.EIO
    raise OSError(code, f"{os.strerror(code)} (failpoint {name})")


def arm_from_environment() -> None:
    """What `zkcdc capture` does first: the points ZKCDC_FAILPOINTS names (FailpointError, a
    one-line error, for a spec that names none)."""
    arm(os.environ.get(ENV, ""))
