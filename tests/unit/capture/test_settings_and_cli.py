"""One settings object per daemon (flags > ZKCDC_ env > TOML file), secrets kept secret, and bad
input ending in one line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.settings import load_settings
from zkcdc.stack.probes import free_port_block


def test_flags_override_env_which_overrides_the_config_file(tmp_path, monkeypatch):
    config = tmp_path / "capture.toml"
    config.write_text(
        '[capture]\nzookeeper = "file:2181/kafka"\ntopic = "from.file"\nheartbeat-s = 5.0\n'
        'cluster = "file"\n'
    )
    monkeypatch.setenv("ZKCDC_TOPIC", "from.env")
    monkeypatch.setenv("ZKCDC_HEARTBEAT_S", "2")
    settings = load_settings(config, heartbeat_s=0.5)
    assert settings.zookeeper == "file:2181/kafka"
    assert settings.topic == "from.env"
    assert settings.heartbeat_s == 0.5
    assert settings.cluster == "file"


def test_secrets_pass_through_but_never_print(monkeypatch):
    monkeypatch.setenv("ZKCDC_ZOOKEEPER_AUTH", "zkuser:zkpass")
    settings = load_settings(
        None,
        zookeeper="h:1",
        bootstrap_servers="b:1",
        kafka_config={"sasl.password": "kpass", "security.protocol": "SASL_SSL"},
    )
    kafka = settings.kafka()
    assert kafka is not None and kafka.librdkafka()["sasl.password"] == "kpass"
    assert settings.zookeeper_auth is not None
    assert settings.zookeeper_auth.get_secret_value() == "zkuser:zkpass"
    shown = repr(settings) + str(settings.model_dump()) + repr(kafka) + kafka.describe()
    assert "kpass" not in shown and "zkpass" not in shown


def test_a_bad_setting_is_one_clear_error():
    with pytest.raises(CaptureError, match="heartbeat_s"):
        load_settings(None, zookeeper="h:1", heartbeat_s=-1)


@pytest.mark.parametrize(
    ("flags", "field"),
    [({"commit_interval_ms": -1}, "commit_interval_ms"), ({"commit_records": 0}, "commit_records")],
)
def test_a_bad_commit_interval_or_size_is_one_clear_error(flags, field):
    with pytest.raises(CaptureError, match=field):
        load_settings(None, zookeeper="h:1", **flags)


def test_the_commit_interval_comes_from_the_flag_over_the_environment(monkeypatch):
    monkeypatch.setenv("ZKCDC_COMMIT_INTERVAL_MS", "250")
    assert load_settings(None, zookeeper="h:1").commit_interval_ms == 250
    assert load_settings(None, zookeeper="h:1", commit_interval_ms=0).commit_interval_ms == 0


def _zkcdc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "zkcdc", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_capture_with_zookeeper_unreachable_exits_non_zero_with_one_line():
    port = free_port_block(1)
    done = _zkcdc(
        "capture", "--zookeeper", f"127.0.0.1:{port}/kafka", env={"ZKCDC_CONNECT_TIMEOUT_S": "1"}
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"zkcdc: error: ZooKeeper at 127.0.0.1:{port} is unreachable (no session within 1 s)"
    ]


def test_capture_without_a_zookeeper_says_which_setting_is_missing():
    done = _zkcdc("capture", env={"ZKCDC_ZOOKEEPER": ""})
    assert done.returncode != 0
    assert "zookeeper" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read config file .*: no such file"),
        ("zookeeper = \n", r"config file .*capture\.toml: Invalid value"),
        (
            "[capture]\nzookeepr = 'h:1'\n",
            "unknown setting zookeepr in .* \\(did you mean zookeeper\\?\\)",
        ),
        ("[capture]\nheartbeat-s = 'soon'\n", "heartbeat_s"),
    ],
)
def test_a_bad_config_file_is_one_clear_error(tmp_path, monkeypatch, text, message):
    # The suite sets ZKCDC_HEARTBEAT_S (conftest), and the environment wins over the file.
    monkeypatch.delenv("ZKCDC_HEARTBEAT_S", raising=False)
    config = tmp_path / "capture.toml"
    if text is not None:
        config.write_text(text)
    with pytest.raises(CaptureError, match=message) as failure:
        load_settings(config, zookeeper="127.0.0.1:1")
    assert "\n" not in str(failure.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "ZKCDC_BOOTSTRAP_SERVER",
            r"ZKCDC_BOOTSTRAP_SERVER \(did you mean ZKCDC_BOOTSTRAP_SERVERS\?\)",
        ),
        ("ZKCDC_ZOOKEPER", r"ZKCDC_ZOOKEPER \(did you mean ZKCDC_ZOOKEEPER\?\)"),
        ("ZKCDC_NOTHING_LIKE_IT", r"^unknown environment variable ZKCDC_NOTHING_LIKE_IT$"),
    ],
)
def test_an_unknown_zkcdc_variable_is_one_line_naming_the_closest(monkeypatch, name, message):
    """A misspelt variable was ignored: capture ran without what it was meant to say."""
    monkeypatch.setenv(name, "127.0.0.1:9092")
    with pytest.raises(CaptureError, match=message):
        load_settings(None, zookeeper="127.0.0.1:1")


def test_variables_every_command_reads_and_open_families_are_not_refused(monkeypatch):
    for name in ("ZKCDC_CACHE_DIR", "ZKCDC_KAFKA_SASL_USERNAME", "ZKCDC_STACK_BROKERS",
                 "ZKCDC_ZOOKEEPER_AUTH", "ZKCDC_TRANSACTIONS"):  # fmt: skip
        monkeypatch.setenv(name, "x" if name != "ZKCDC_TRANSACTIONS" else "false")
    monkeypatch.setenv("ZKCDC_ZOOKEEPER_AUTH", "zkuser:zkpass")
    assert load_settings(None, zookeeper="127.0.0.1:1").transactions is False


def test_zkcdc_config_file_names_the_file_as_config_does(tmp_path, monkeypatch):
    monkeypatch.delenv("ZKCDC_HEARTBEAT_S", raising=False)  # the suite's: it would win
    config = tmp_path / "capture.toml"
    config.write_text("[capture]\ntopic = 'from.file'\nheartbeat-s = 7\n")
    monkeypatch.setenv("ZKCDC_CONFIG_FILE", str(config))
    settings = load_settings(None, zookeeper="127.0.0.1:1")
    assert (settings.topic, settings.heartbeat_s) == ("from.file", 7)
    monkeypatch.setenv("ZKCDC_CONFIG_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(CaptureError, match=r"cannot read config file .*missing\.toml: no such"):
        load_settings(None, zookeeper="127.0.0.1:1")


def test_an_unknown_variable_stops_the_command_in_one_line_and_exit_1():
    done = _zkcdc("capture", "--zookeeper", "127.0.0.1:1", env={"ZKCDC_BOOTSTRAP_SERVER": "x"})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "zkcdc: error: unknown environment variable ZKCDC_BOOTSTRAP_SERVER "
        "(did you mean ZKCDC_BOOTSTRAP_SERVERS?)"
    ], done.stderr
