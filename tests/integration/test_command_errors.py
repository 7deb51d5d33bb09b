"""Every command, given what users get wrong or what the world does to it (an unreachable
ZooKeeper or Kafka, a busy port, a damaged or unusable file, a misspelt config key, an unknown
option value): one clear line on stderr (at most a few), a non-zero exit, never a traceback,
never a flood of client-library lines. Run as the real `zkcdc` processes users run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcdc.capture.delivery.event_log import EventLogWriter
from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.stack import probes

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _zkcdc(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "zkcdc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "ZKCDC_CONNECT_TIMEOUT_S": "3", **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def _assert_one_clear_line(result: Any, *expected: str) -> None:
    err = result.stderr
    shown = f"exit {result.returncode}\nstderr:\n{err[-3000:]}"
    assert result.returncode != 0, shown
    assert "Traceback" not in err, shown
    assert "%3|" not in err and "%4|" not in err, f"raw librdkafka lines\n{shown}"
    # The daemons' structured log records (JSON) may come first; what is not one is for people.
    plain = [line for line in err.splitlines() if line.strip() and not line.startswith("{")]
    assert 1 <= len(plain) <= 3, shown
    assert len(err.splitlines()) <= 20, f"a flood of lines\n{shown}"
    for text in expected:
        assert text in plain[-1], shown


@pytest.fixture
def free_port() -> int:
    return probes.free_port()


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


@pytest.fixture
def event_log(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    tracker = Tracker(TrackerState(cluster="c1"), lambda: 1_000)
    records = tracker.read("/brokers/ids/1", Znode(b'{"version":1,"host":"h","port":1}', 0, 1, 1))
    writer = EventLogWriter(folder, "c1", now=lambda: 0.0)
    writer.append([r.to_avro() for r in records])
    writer.close()
    return folder


@pytest.fixture
def damaged_log(event_log: Path) -> Path:
    (file,) = event_log.iterdir()
    data = bytearray(file.read_bytes())
    data[-20] ^= 0xFF  # inside the last block
    file.write_bytes(bytes(data[:-5]))  # and torn
    return event_log


def _zookeeper(cluster: Any, zk_chroot: Any) -> str:
    return cluster.zookeeper_hosts + zk_chroot.chroot


def test_capture_with_zookeeper_unreachable(free_port: int, tmp_path: Path) -> None:
    result = _zkcdc(
        "capture", "--zookeeper", f"127.0.0.1:{free_port}", "--state-dir", str(tmp_path)
    )
    _assert_one_clear_line(result, "zkcdc: error:", "ZooKeeper", "unreachable")


def test_capture_with_kafka_unreachable_has_no_librdkafka_flood(
    cluster: Any, zk_chroot: Any, free_port: int, tmp_path: Path
) -> None:
    result = _zkcdc("capture", "--zookeeper", _zookeeper(cluster, zk_chroot), "--cluster", "c1",
                    "--bootstrap-servers", f"127.0.0.1:{free_port}", "--state-dir", str(tmp_path))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", "Kafka", "unreachable")


def test_capture_with_its_metrics_port_busy(
    cluster: Any, zk_chroot: Any, busy_port: int, tmp_path: Path
) -> None:
    result = _zkcdc("capture", "--zookeeper", _zookeeper(cluster, zk_chroot), "--cluster", "c1",
                    "--metrics-port", str(busy_port), "--state-dir", str(tmp_path))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", f"{busy_port}", "in use")


def test_capture_with_a_misspelt_config_key(tmp_path: Path) -> None:
    config = tmp_path / "capture.toml"
    config.write_text('[capture]\nzookeeper = "127.0.0.1:2181"\nbootstrap_server = "k:9092"\n')
    result = _zkcdc("capture", "--config", str(config))
    _assert_one_clear_line(result, "unknown setting bootstrap_server", "bootstrap_servers")


def test_capture_with_an_unknown_option_value() -> None:
    result = _zkcdc("capture", "--zookeeper", "127.0.0.1:2181", "--watch-mode", "sometimes")
    _assert_one_clear_line(result, "Invalid value for '--watch-mode'")


def test_capture_with_a_damaged_checkpoint(cluster: Any, zk_chroot: Any, tmp_path: Path) -> None:
    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "tree.avro").write_bytes(b"Obj\x01 not a tree")
    result = _zkcdc("capture", "--zookeeper", _zookeeper(cluster, zk_chroot), "--cluster", "c1",
                    "--state-dir", str(tmp_path))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", "tree.avro is unreadable")


def test_capture_with_an_event_log_it_cannot_create(
    cluster: Any, zk_chroot: Any, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = _zkcdc("capture", "--zookeeper", _zookeeper(cluster, zk_chroot), "--cluster", "c1",
                    "--state-dir", str(tmp_path), "--event-log", str(blocker / "events"))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", "cannot create event log folder")


def test_events_cat_of_a_damaged_log_names_the_damage(damaged_log: Path) -> None:
    result = _zkcdc("events", "cat", str(damaged_log))
    _assert_one_clear_line(result, "damaged at block")


@pytest.mark.parametrize("command", ["cat", "stats"])
def test_events_with_an_unknown_type_filter(event_log: Path, command: str) -> None:
    result = _zkcdc("events", command, str(event_log), "--type", "ISR_SHRUNKK")
    _assert_one_clear_line(result, "ISR_SHRUNKK", "not an op or event type")


def test_replay_into_kafka_unreachable(event_log: Path, free_port: int, tmp_path: Path) -> None:
    result = _zkcdc("replay", str(event_log), "--bootstrap-servers", f"127.0.0.1:{free_port}",
                    "--checkpoint", str(tmp_path / "replay.json"))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", "unreachable")


def test_replay_of_a_missing_log(tmp_path: Path) -> None:
    result = _zkcdc("replay", str(tmp_path / "nothing"), "--alerts-out", str(tmp_path / "a"))
    _assert_one_clear_line(result, "does not exist")


@pytest.mark.parametrize("command", ["replay", "stream"])
def test_an_alerts_file_that_cannot_be_written(event_log: Path, command: str) -> None:
    blocked = event_log / "a-file" / "alerts.jsonl"  # a folder that is a file
    (event_log / "a-file").write_text("")
    args = ["replay", str(event_log)] if command == "replay" else [
        "stream", "alerts", "--event-log", str(event_log), "--available-now"]  # fmt: skip
    result = _zkcdc(*args, "--alerts-out", str(blocked))
    _assert_one_clear_line(result, "--alerts-out", "cannot make")


@pytest.mark.parametrize(
    ("written", "asked", "told"),
    [
        ('{"shards": 3}', "0", "resume it with --shards 3"),
        (None, "2", "resume it with --shards 0"),  # a checkpoint of a release before shards
        ('{"shards": 2, "buckets": "by-moon"}', "2", "with the later release that wrote it"),
    ],
)
def test_stream_alerts_on_a_checkpoint_of_another_layout(
    event_log: Path, tmp_path: Path, written: str | None, asked: str, told: str
) -> None:
    """Refused before Spark starts, saying how to resume it or start afresh without a loss."""
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "alerts" / "offsets").mkdir(parents=True)
    if written is not None:
        (checkpoint / "alert-stage.json").write_text(written)
    result = _zkcdc("stream", "alerts", "--event-log", str(event_log), "--available-now",
                    "--alerts-out", str(tmp_path / "alerts.jsonl"), "--checkpoint",
                    str(checkpoint), "--shards", asked)  # fmt: skip
    _assert_one_clear_line(result, told, "zkcdc replay")
    assert not (checkpoint / "alerts" / "commits").exists(), "Spark ran on it"


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("harm", "named"),
    [
        (lambda q: _cut(sorted((q / "state" / "0" / "0" / "SSTs").glob("0*.sst"))[0]),
         "state/0/0/SSTs/"),
        (lambda q: (q / "offsets" / "0").write_bytes(b"\x00\xff"), "offsets/0: not text"),
        (lambda q: shutil.rmtree(q / "state"), "state/: missing"),
        (lambda q: (q / "state" / "0" / "_metadata" / "v2" / "0").write_bytes(b"\xff"),
         "state/0/_metadata/v2/0"),
        # The query's checkpoint gone, its sinks' ledger left: a new query's first micro-batch
        # would be taken for the one delivered, and its alerts dropped.
        (shutil.rmtree, "sink-ledger: says micro-batch 0 was delivered"),
        # Its layout marker copied from another checkpoint: records would go to shards whose
        # state is elsewhere.
        (lambda q: (q.parent / "alert-stage.json").write_text('{"shards": 3}'),
         "alert-stage.json says 3 partition shards"),
    ],
)  # fmt: skip
def test_stream_alerts_on_a_damaged_checkpoint(
    event_log: Path, tmp_path: Path, harm: Any, named: str
) -> None:
    """Today's release's checkpoint (tests/fixtures/checkpoint_v2) with a file damaged:
    refused before Spark starts, naming the file and how to start afresh without a loss."""
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "checkpoint_v2" / "shards-2", checkpoint)
    harm(checkpoint / "alerts")
    result = _zkcdc("stream", "alerts", "--event-log", str(event_log), "--available-now",
                    "--alerts-out", str(tmp_path / "alerts.jsonl"), "--checkpoint",
                    str(checkpoint))  # fmt: skip
    _assert_one_clear_line(result, "cannot be resumed", named, "start afresh", "zkcdc replay")
    assert not (checkpoint / "alerts" / "commits" / "1").exists(), "Spark ran on it"


def test_stream_history_on_a_damaged_checkpoint(event_log: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    for folder in ("commits", "offsets", "sources/0"):
        (checkpoint / folder).mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"5f0c"}')
    (checkpoint / "sources" / "0" / "0").write_text('v1\n{"path":"file:///log/a.avro"}')
    for batch in ("0", "1"):
        (checkpoint / "offsets" / batch).write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":0}')
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (checkpoint / "commits" / "1").write_text("v1\n")  # cut short by a full disk
    result = _zkcdc("stream", "history", "--event-log", str(event_log), "--available-now",
                    "--lake", str(tmp_path / "lake"), "--checkpoint", str(checkpoint))  # fmt: skip
    _assert_one_clear_line(result, "cannot be resumed", "commits/1: cut short", "new --checkpoint")


def test_replay_shards_without_alerts_out(event_log: Path, free_port: int) -> None:
    result = _zkcdc("replay", str(event_log), "--bootstrap-servers", f"127.0.0.1:{free_port}",
                    "--shards", "2")  # fmt: skip
    _assert_one_clear_line(result, "--shards goes with --alerts-out")


def test_state_show_with_kafka_unreachable(free_port: int) -> None:
    result = _zkcdc("state", "show", "--bootstrap-servers", f"127.0.0.1:{free_port}")
    _assert_one_clear_line(result, "zkcdc: error:", f"127.0.0.1:{free_port}")


def test_stream_alerts_with_kafka_unreachable(free_port: int, tmp_path: Path) -> None:
    result = _zkcdc("stream", "alerts", "--bootstrap-servers", f"127.0.0.1:{free_port}",
                    "--checkpoint", str(tmp_path / "cp"))  # fmt: skip
    _assert_one_clear_line(result, "zkcdc: error:", "unreachable")


def test_simulate_with_zookeeper_unreachable(free_port: int) -> None:
    result = _zkcdc("simulate", "build", "--zookeeper", f"127.0.0.1:{free_port}/kafka")
    _assert_one_clear_line(result, "zkcdc: error:", "unreachable")


def test_stack_up_with_a_port_in_use(busy_port: int, tmp_path: Path) -> None:
    result = _zkcdc("stack", "up", "--state-dir", str(tmp_path), "--zookeeper-port", str(busy_port))
    _assert_one_clear_line(result, "zkcdc: error:", str(busy_port))


def test_a_bad_failpoint_spec_is_one_line(tmp_path: Path) -> None:
    result = _zkcdc("capture", "--zookeeper", "127.0.0.1:1", "--state-dir", str(tmp_path),
                    env={"ZKCDC_FAILPOINTS": "event_log.wirte=1:raise"})  # fmt: skip
    _assert_one_clear_line(result, "ZKCDC_FAILPOINTS")
