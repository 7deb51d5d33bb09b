"""Every command that reads settings reads them one way: flags, then `ZKCDC_*` variables, then
its table of a TOML file (`--config` or `ZKCDC_CONFIG_FILE`), then defaults; an unknown
variable or key is refused in one line with the closest name (zkcdc/ground/command_settings.py).
Shown here on `stream alerts` and `stream state`, `zkcdc stack`, and the registry that lets one
environment serve several commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from zkcdc.capture.settings import CaptureSettings
from zkcdc.cli import main
from zkcdc.ground import command_settings, environment
from zkcdc.ground.command_settings import SettingsError
from zkcdc.stack.settings import StackSettings
from zkcdc.streaming.stream_settings import StreamSettings


@pytest.fixture(autouse=True)
def _own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets (the suite's own, such as ZKCDC_HEARTBEAT_S, are kept:
    they are settings of other commands)."""
    for name in ("ZKCDC_CONFIG_FILE", "ZKCDC_TOPIC", "ZKCDC_SHARDS"):
        monkeypatch.delenv(name, raising=False)


def load(flags: dict[str, object], **environ: str) -> StreamSettings:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        return command_settings.load(StreamSettings, flags)


def toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "zkcdc.toml"
    path.write_text(text)
    return path


def test_flags_win_over_the_environment_which_wins_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = toml(tmp_path, '[stream]\ntopic = "from.file"\nmaster = "local[1]"\n'
                  'alerts-topic = "alerts.file"\n')  # fmt: skip
    monkeypatch.setenv("ZKCDC_TOPIC", "from.env")
    monkeypatch.setenv("ZKCDC_ALERTS_TOPIC", "alerts.env")
    s = command_settings.load(
        StreamSettings, {"config_file": config, "alerts_topic": "alerts.flag"}
    )
    assert (s.alerts_topic, s.topic, s.master) == ("alerts.flag", "from.env", "local[1]")
    assert s.state_topic == "zkcdc.state"  # the default, named nowhere


def test_a_file_named_by_the_environment_is_read_as_by_the_flag(tmp_path: Path) -> None:
    config = toml(tmp_path, "[stream]\nshards = 3\n")
    assert load({}, ZKCDC_CONFIG_FILE=str(config)).shards == 3


def test_a_file_of_several_commands_gives_each_its_own_table(tmp_path: Path) -> None:
    config = toml(tmp_path, "[capture]\nheartbeat-s = 5\n[stream]\ntrigger-ms = 250\n")
    assert load({"config_file": config}).trigger_ms == 250


@pytest.mark.parametrize(
    ("environ", "line"),
    [
        ({"ZKCDC_ALERTS_TOPICS": "x"},
         "unknown environment variable ZKCDC_ALERTS_TOPICS (did you mean ZKCDC_ALERTS_TOPIC?)"),
        ({"ZKCDC_BOOTSTRAP_SERVER": "k:9092"}, "(did you mean ZKCDC_BOOTSTRAP_SERVERS?)"),
    ],
)  # fmt: skip
def test_an_unknown_variable_is_refused_in_one_line_with_the_closest_name(
    environ: dict[str, str], line: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load({}, **environ)
    assert line in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_key_is_refused_in_one_line_naming_the_file(tmp_path: Path) -> None:
    config = toml(tmp_path, '[stream]\nalert-topic = "a"\n')
    with pytest.raises(SettingsError) as caught:
        load({"config_file": config})
    assert str(caught.value) == (
        f"unknown setting alert_topic in {config} (did you mean alerts_topic?)"
    )


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"ZKCDC_DRIVER_MEMORY": "lots"}, "driver_memory"),
        ({"ZKCDC_SHARDS": "-1"}, "shards"),
        ({"ZKCDC_WEBHOOKS": '["ftp://hooks.example/secret-path"]'}, "not an http"),
        ({"ZKCDC_WEBHOOK_FORMAT": "xml"}, "webhook_format"),
    ],
)
def test_a_bad_value_from_the_environment_is_one_line_as_a_bad_flag_is(
    environ: dict[str, str], words: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load({}, **environ)
    message = str(caught.value)
    assert words in message and "\n" not in message and "secret-path" not in message


def test_a_missing_or_broken_config_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="no such file"):
        load({"config_file": tmp_path / "none.toml"})
    with pytest.raises(SettingsError, match="config file"):
        load({"config_file": toml(tmp_path, "[stream\n")})


def test_one_environment_serves_several_commands() -> None:
    """A capture's setting is no typo for the alert job, nor the job's for capture."""
    assert load({}, ZKCDC_HEARTBEAT_S="5").topic == "zkcdc.changes"
    capture_only = environment.unknown_variable(
        CaptureSettings.model_fields, {"ZKCDC_ALERTS_TOPIC": "a"}
    )
    assert capture_only is None


def test_the_registry_of_every_commands_settings_is_the_models() -> None:
    assert {
        "capture": frozenset(CaptureSettings.model_fields),
        "stream": frozenset(StreamSettings.model_fields),
    } == environment.COMMAND_SETTINGS


@pytest.mark.parametrize("command", [["stream", "alerts"], ["stream", "state"]])
def test_the_stream_commands_refuse_an_unknown_variable_before_starting_anything(
    command: list[str],
) -> None:
    result = CliRunner().invoke(
        main, [*command, "--bootstrap-servers", "127.0.0.1:1"],
        env={"ZKCDC_ALERTS_TOPICZ": "x"},
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "zkcdc: error: unknown environment variable ZKCDC_ALERTS_TOPICZ "
        "(did you mean ZKCDC_ALERTS_TOPIC?)"
    )


def test_the_stream_commands_refuse_an_unknown_config_key(tmp_path: Path) -> None:
    config = toml(tmp_path, "[stream]\nmax-records-per-bach = 5\n")
    result = CliRunner().invoke(main, ["stream", "alerts", "--config", str(config)])
    assert result.exit_code == 1
    assert "unknown setting max_records_per_bach" in result.stderr
    assert "(did you mean max_records_per_batch?)" in result.stderr


def test_the_stack_refuses_an_unknown_variable_of_its_family() -> None:
    result = CliRunner().invoke(main, ["stack", "status"], env={"ZKCDC_STACK_BROKER": "5"})
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "zkcdc: error: unknown environment variable ZKCDC_STACK_BROKER "
        "(did you mean ZKCDC_STACK_BROKERS?)"
    )
    assert (
        environment.unknown_in_family(
            "ZKCDC_STACK_", StackSettings.model_fields, {"ZKCDC_STACK_BROKERS": "5"}
        )
        is None
    )


def test_the_flags_defaults_are_the_settings_defaults() -> None:
    """`--help` shows click's defaults; the settings model decides: the two agree."""
    from zkcdc.streaming.cli import alerts_command

    for param in alerts_command.params:
        unset = type(param.default).__name__ == "Sentinel"  # click's "no default"
        if param.name in StreamSettings.model_fields and param.default is not None and not unset:
            field = StreamSettings.model_fields[param.name]
            if field.default_factory is None and not callable(param.default):
                expected = field.default
                shown = param.default
                if param.name == "shards":
                    shown = None if shown == "auto" else shown
                assert shown in (expected, ()) or (shown is False and expected is False), (
                    param.name,
                    shown,
                    expected,
                )


def test_the_alert_jobs_options_come_from_flags_environment_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `stream alerts` hands its job, the job itself left out (it is Spark's, and run by
    the integration tests)."""
    from zkcdc.streaming import cli

    given: list[object] = []
    monkeypatch.setattr(cli, "run", lambda options, stop: given.append(options))
    monkeypatch.setattr(cli.signal, "signal", lambda *_: None)  # the test's own handlers stay
    config = toml(tmp_path, '[stream]\ntrigger-ms = 1000\nwebhook-format = "slack"\n')
    monkeypatch.setenv("ZKCDC_MASTER", "local[1]")
    result = CliRunner().invoke(main, [
        "stream", "alerts", "--config", str(config), "--event-log", str(tmp_path),
        "--available-now", "--alerts-out", str(tmp_path / "alerts.jsonl"), "--shards", "2",
        "--rule", "under_replicated_for_ms=2000", "--max-records-per-batch", "7",
        "--checkpoint", str(tmp_path / "cp"),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    [options] = given
    assert options.master == "local[1]" and options.trigger_ms == 1000  # type: ignore[attr-defined]
    assert options.partition_shards == 2 and options.available_now  # type: ignore[attr-defined]
    assert options.rules.under_replicated_for_ms == 2000  # type: ignore[attr-defined]
    assert options.sinks.alerts_out == tmp_path / "alerts.jsonl"  # type: ignore[attr-defined]
    assert options.sinks.webhook_format == "slack"  # type: ignore[attr-defined]
    assert options.checkpoint == tmp_path / "cp"  # type: ignore[attr-defined]


def test_replay_reads_its_own_variables_and_table_and_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zkcdc.replay import replay_settings

    config = toml(tmp_path, '[replay]\ntopic = "replayed"\n[stream]\ntopic = "other"\n')
    monkeypatch.setenv("ZKCDC_REPLAY_MASTER", "local[1]")
    monkeypatch.setenv("ZKCDC_CHECKPOINT", "/a/job's/checkpoint")  # the alert job's, not replay's
    s = replay_settings.load({"config_file": config})
    assert (s.topic, s.master, s.checkpoint) == ("replayed", "local[1]", None)
    monkeypatch.setenv("ZKCDC_REPLAY_MASTR", "x")
    result = CliRunner().invoke(main, ["replay", str(tmp_path), "--alerts-out", "a.jsonl"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "zkcdc: error: unknown environment variable ZKCDC_REPLAY_MASTR "
        "(did you mean ZKCDC_REPLAY_MASTER?)"
    )
