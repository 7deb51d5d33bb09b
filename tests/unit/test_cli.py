"""Every command has --help; bad input is one line on stderr and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from zkcdc.cli import main


@pytest.mark.parametrize(
    "args",
    [[], ["stack"], ["stack", "up"], ["stack", "down"], ["stack", "status"], ["stack", "migrate"]],
)
def test_every_command_has_help(args: list[str]):
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.output


def test_status_without_a_stack_is_one_clear_line(tmp_path: Path):
    result = CliRunner().invoke(main, ["stack", "status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output == f"zkcdc: error: no stack in {tmp_path}: run 'zkcdc stack up' first\n"


def test_down_without_a_stack_stops_nothing(tmp_path: Path):
    result = CliRunner().invoke(main, ["stack", "down", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert "nothing to stop" in result.output


def test_a_corrupt_state_file_is_reported_not_a_traceback(tmp_path: Path):
    (tmp_path / "stack.json").write_text("{not json")
    result = CliRunner().invoke(main, ["stack", "status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.startswith(f"zkcdc: error: unreadable stack state {tmp_path}/stack.json")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--brokers", "0"],
            "zkcdc: error: invalid setting brokers: Input should be greater than or equal to 1",
        ),
        (
            ["--chroot", "kafka"],
            "zkcdc: error: invalid setting chroot: chroot must look like",
        ),
    ],
)
def test_invalid_settings_are_one_line(tmp_path: Path, args: list[str], message: str):
    result = CliRunner().invoke(main, ["stack", "up", "--state-dir", str(tmp_path), *args])
    assert result.exit_code == 1
    assert result.output.startswith(message)
    assert result.output.count("\n") == 1


def test_a_malformed_broker_config_is_a_usage_error(tmp_path: Path):
    result = CliRunner().invoke(
        main, ["stack", "up", "--state-dir", str(tmp_path), "--broker-config", "x"]
    )
    assert result.exit_code == 2
    assert "expected KEY=VALUE, got 'x'" in result.output


def test_following_a_live_event_log_is_refused_in_one_line(tmp_path: Path):
    # Spark's file source reads a file once: appends to a live capture's file would be lost.
    result = CliRunner().invoke(
        main, ["stream", "alerts", "--event-log", str(tmp_path), "--no-publish"]
    )
    assert result.exit_code == 1
    assert result.output.startswith("zkcdc: error: --event-log reads a captured log as it stands")
    assert result.output.count("\n") == 1


@pytest.mark.parametrize("size", ["2x", "0", "-1g", "g", "1.5g", ""])
def test_a_driver_memory_java_would_refuse_is_one_clear_line(tmp_path: Path, size: str):
    result = CliRunner().invoke(
        main, ["stream", "alerts", "--event-log", str(tmp_path), "--driver-memory", size]
    )
    assert result.exit_code == 2
    assert f"expected a size such as 512m or 2g, got {size!r}" in result.output


def _recorded_stack(folder: Path, **settings: object) -> None:
    """A stack.json as `up` leaves it, for a stack whose processes are not running."""
    from zkcdc.stack.cluster import LocalStack
    from zkcdc.stack.settings import StackSettings

    LocalStack(StackSettings(state_dir=folder, **settings))._save()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("recorded", "args", "says"),
    [
        (None, [], "no stack in {dir}: run 'zkcdc stack up' first"),
        ({"mode": "kraft"}, [], "the stack runs in KRaft mode already: nothing to migrate"),
        ({"secure": True}, [], "a --secure stack cannot be migrated by zkcdc (plaintext only)"),
        ({}, [], "stack in {dir} is not (all) running"),
    ],
)
def test_a_migration_that_cannot_run_is_one_clear_line(
    tmp_path: Path, recorded: dict[str, object] | None, args: list[str], says: str
) -> None:
    if recorded is not None:
        _recorded_stack(tmp_path, **recorded)
    result = CliRunner().invoke(main, ["stack", "migrate", "--state-dir", str(tmp_path), *args])
    assert result.exit_code == 1
    assert result.output == "zkcdc: error: " + says.format(dir=tmp_path.resolve()) + "\n"


def test_a_migration_phase_that_is_not_kafka_s_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["stack", "migrate", "--state-dir", str(tmp_path),
                                       "--until", "halfway"])  # fmt: skip
    assert result.exit_code == 2
    assert "'halfway' is not one of 'controllers', 'dual-write'" in result.output


# What each command may leave out: the modules of the commands it is not.
OTHERS = {
    "capture": ("zkcdc.stack.", "zkcdc.streaming.job.", "zkcdc.view.", "zkcdc.replay."),
    "simulate": ("zkcdc.stack.", "zkcdc.streaming.job.", "zkcdc.view.", "zkcdc.replay."),
    # (the stack fetches Spark's jars too: spark_jars)
    "stack": ("zkcdc.capture.cli", "zkcdc.streaming.job.alert", "zkcdc.view.", "zkcdc.replay."),
}


@pytest.mark.parametrize("command", sorted(OTHERS))
def test_a_command_imports_only_what_it_runs(command: str) -> None:
    """A command's start is its own modules' imports: `zkcdc capture` (started hundreds of
    times by a test run, and by every supervisor restart) does not import the Spark job's."""
    probe = (
        "import sys; from zkcdc.cli import main\n"
        f"try: main([{command!r}, '--help'])\n"
        "except SystemExit: pass\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('zkcdc.')))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)  # fmt: skip
    loaded = set(run.stdout.split())
    assert f"zkcdc.{command}.cli" in loaded, sorted(loaded)
    assert not [m for m in loaded if m.startswith(OTHERS[command])], sorted(loaded)


@pytest.mark.parametrize(
    ("setting", "value"),
    [("warm_up_batches", "-1"), ("warm_up_batches", "1001"), ("compiler_niceness", "-1"),
     ("compiler_niceness", "20"), ("take_backlog_at", "-1")],
)  # fmt: skip
def test_a_job_setting_out_of_range_is_one_line_before_spark_starts(
    tmp_path: Path, setting: str, value: str
):
    result = CliRunner().invoke(
        main, ["stream", "alerts", "--event-log", str(tmp_path), "--available-now",
               "--no-publish", "--" + setting.replace("_", "-"), value],
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.output.startswith(f"zkcdc: error: invalid setting {setting}: Input should")
    assert result.output.count("\n") == 1
