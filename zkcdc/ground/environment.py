"""The `ZKCDC_*` environment variables zkcdc reads, so a command can refuse one it does not
know: a misspelt `ZKCDC_BOOTSTRAP_SERVER` must not run capture without Kafka.

A command's own settings are `ZKCDC_<FIELD>`; these are read beside them by every command, and
the families' rest is open: a librdkafka property (`ZKCDC_KAFKA_SASL_PASSWORD`), a ZooKeeper
client setting, a `zkcdc stack` setting, the test suite's own."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping

PREFIX = "ZKCDC_"
SHARED = frozenset({
    "ZKCDC_CACHE_DIR", "ZKCDC_SCHEMA_DIR", "ZKCDC_PORT_RANGE", "ZKCDC_CONNECT_TIMEOUT_S",
    "ZKCDC_FAILPOINTS", "ZKCDC_SPARK_CLASS_ARCHIVE", "ZKCDC_SPARK_CLASS_ARCHIVE_TRAINING",
})  # fmt: skip
FAMILIES = ("ZKCDC_KAFKA_", "ZKCDC_ZOOKEEPER_", "ZKCDC_STACK_", "ZKCDC_TEST_")


def did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """ " (did you mean X?)" with the known name closest to a misspelt one, or "" when none
    is close: the hint of every "unknown setting" line. Names are compared after a `prefix`
    they all share (or every name would be alike)."""
    rest = {n.removeprefix(prefix): n for n in known}
    close = difflib.get_close_matches(name.removeprefix(prefix), sorted(rest), n=1)
    return f" (did you mean {rest[close[0]]}?)" if close else ""


def unknown_variable(fields: Iterable[str], environ: Mapping[str, str] | None = None) -> str | None:
    """The first `ZKCDC_*` variable set that is neither one of `fields` (as `ZKCDC_<FIELD>`)
    nor read by every command, with the closest known name: one line, or None."""
    environ = os.environ if environ is None else environ
    own = {PREFIX + f.upper() for f in fields}
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in own or name in SHARED:
            continue
        if name.startswith(FAMILIES):
            continue
        return f"unknown environment variable {name}{did_you_mean(name, own | SHARED, PREFIX)}"
    return None
