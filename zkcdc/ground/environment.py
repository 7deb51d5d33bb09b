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
# Each variable with what it does: the reference's settings page is generated from these.
SHARED: dict[str, str] = {
    "ZKCDC_CACHE_DIR": "Where Maven jars, built wheels and Spark's class archive are kept "
    "[default: `$XDG_CACHE_HOME/zkcdc`, else `~/.cache/zkcdc`].",
    "ZKCDC_SCHEMA_DIR": "A folder of `.avsc` files read instead of the installed schemas.",
    "ZKCDC_PORT_RANGE": "`LOW-HIGH`: the ports a local stack or test picks free ports from "
    "[default: outside the kernel's ephemeral range].",
    "ZKCDC_CONNECT_TIMEOUT_S": "How long a command waits for ZooKeeper or Kafka to answer "
    "before it gives up with one line [default: per command].",
    "ZKCDC_FAILPOINTS": "Fault injection for tests, e.g. `event_log.fsync=3:raise;kafka.ack=10:"
    "kill`: the named point fails on its Nth pass.",
    "ZKCDC_SPARK_CLASS_ARCHIVE": "`off`: Spark's JVM neither records nor uses a class-data "
    "archive (quicker starts when on).",
    "ZKCDC_SPARK_CLASS_ARCHIVE_TRAINING": "Set by zkcdc itself in the run that records the "
    "class-data archive.",
    # The deployment files' own: read by their units and scripts, beside the commands they run.
    "ZKCDC_ALERTS_ARGS": "The flags of `stream alerts` in its systemd unit "
    "(`deploy/systemd/zkcdc-alerts@.service`).",
    "ZKCDC_UI_ARGS": "The flags of `zkcdc ui` in its systemd unit (`deploy/systemd/zkcdc-ui@.service`).",
    "ZKCDC_ZIP_DIR": "Where `deploy/spark/submit.sh` builds zkcdc's package for the executors.",
}
# Families whose rest is open, each with what it holds.
FAMILIES: dict[str, str] = {
    "ZKCDC_KAFKA_": "A librdkafka property, e.g. `ZKCDC_KAFKA_SASL_PASSWORD` for "
    "`sasl.password` (secrets belong here or in a file, never on a command line).",
    "ZKCDC_ZOOKEEPER_": "A ZooKeeper client setting (TLS, SASL), as the `--zookeeper-*` flags.",
    "ZKCDC_STACK_": "A `zkcdc stack` setting (below).",
    "ZKCDC_REPLAY_": "A `zkcdc replay` setting (below).",
    "ZKCDC_HISTORY_": "A `zkcdc history` setting (below).",
    "ZKCDC_TEST_": "The test suite's own switches.",
}

# Every command's own settings (ZKCDC_<FIELD>), by command. One environment often serves
# several commands (a host's capture and alert job), so a variable one command reads is no
# typo for another: only a name no command reads is refused. tests/unit/
# test_command_settings.py keeps these equal to the settings models.
COMMAND_SETTINGS: dict[str, frozenset[str]] = {
    "capture": frozenset({
        "accept_partition_count", "bootstrap_controllers", "bootstrap_servers", "checkpoint_s",
        "chroot", "cluster", "commit_interval_ms", "commit_records", "config_file",
        "connect_timeout_s", "event_log", "event_log_fsync", "ha_path", "heartbeat_s",
        "kafka_config", "kafka_config_file", "keep_secrets", "log_rotate_bytes", "log_rotate_s",
        "max_record_bytes", "metadata_log_dir", "metrics_host", "metrics_port",
        "metrics_web_config", "poll_interval_s", "redaction_key", "schema_registry",
        "session_timeout_s", "source", "state_dir", "take_over", "topic", "topic_partitions",
        "transactional_id", "transactions", "wait", "watch_mode", "zk_data_dir", "zookeeper",
        "zookeeper_auth", "zookeeper_config_file"
    }),
    "stream": frozenset({
        "alertmanager", "alertmanager_resend_s", "alerts_out", "alerts_topic", "available_now",
        "bootstrap_servers", "checkpoint", "compiler_niceness", "config_file", "console",
        "dead_letter_topic",
        "delivery_max_backoff_s", "driver_memory", "event_log", "kafka_config", "kafka_config_file",
        "lake",
        "master", "max_records_per_batch", "metrics_host", "metrics_port", "metrics_web_config",
        "no_publish", "no_state", "rules", "schema_registry", "shards", "starting_offsets",
        "state_topic", "take_backlog_at", "topic", "trigger_ms", "warm_up_batches", "webhook_format",
        "webhooks"
    }),
}  # fmt: skip


def did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """ " (did you mean X?)" with the known name closest to a misspelt one, or "" when none
    is close: the hint of every "unknown setting" line. Names are compared after a `prefix`
    they all share (or every name would be alike)."""
    rest = {n.removeprefix(prefix): n for n in known}
    close = difflib.get_close_matches(name.removeprefix(prefix), sorted(rest), n=1)
    return f" (did you mean {rest[close[0]]}?)" if close else ""


def unknown_variable(fields: Iterable[str], environ: Mapping[str, str] | None = None) -> str | None:
    """The first `ZKCDC_*` variable set that is neither one of `fields` (as `ZKCDC_<FIELD>`),
    nor another command's setting, nor read by every command, with the closest name of the
    command's own: one line, or None."""
    environ = os.environ if environ is None else environ
    own = {PREFIX + f.upper() for f in fields}
    others = {PREFIX + f.upper() for names in COMMAND_SETTINGS.values() for f in names}
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in own or name in SHARED or name in others:
            continue
        if name.startswith(tuple(FAMILIES)):
            continue
        return f"unknown environment variable {name}{did_you_mean(name, own | set(SHARED), PREFIX)}"
    return None


def unknown_in_family(
    family: str, fields: Iterable[str], environ: Mapping[str, str] | None = None
) -> str | None:
    """The first variable of a family (`ZKCDC_STACK_*`) that is none of the family's settings
    (`fields`, as `<family><FIELD>`), with the closest one: one line, or None."""
    environ = os.environ if environ is None else environ
    known = {family + f.upper() for f in fields}
    for name in sorted(environ):
        if name.startswith(family) and name not in known:
            return f"unknown environment variable {name}{did_you_mean(name, known, family)}"
    return None
