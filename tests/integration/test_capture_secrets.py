"""Secrets of Kafka's tree stay out of everything capture writes: with SCRAM credentials under
/config/users and a password in a broker's config, neither the changes topic, nor the event log
nor tree.avro holds them (as bytes, compressed or not, or as decoded values), while
CONFIG_CHANGED still names the keys that changed. `--keep-secrets` keeps them (forensics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from capture_harness import ChangesTopic, decode
from conftest import wait_until

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.ground.change_types import EventType

pytestmark = pytest.mark.integration

SCRAM_1 = (
    "salt=MTIzNDU2Nzg5MA==,stored_key=c3RvcmVkLWtleS0x,server_key=c2VydmVyLWtleS0x,iterations=4096"
)
SCRAM_2 = (
    "salt=MDk4NzY1NDMyMQ==,stored_key=c3RvcmVkLWtleS0y,server_key=c2VydmVyLWtleS0y,iterations=8192"
)
PASSWORD = "broker-keystore-pw-1f3a"
SECRETS = [SCRAM_1, SCRAM_2, PASSWORD, "stored-key-1", "server-key-2"]


class RawTopic(ChangesTopic):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.raw: list[bytes] = []

    def take(self, message: Any) -> None:
        self.raw.append(message.value())
        self.records.append(decode(message.value()))


def _config(**config: str) -> bytes:
    return json.dumps({"version": 1, "config": config}).encode()


def _write_secrets(zk: Any, changes: ChangesTopic) -> None:
    zk.create("/config/users/u", _config(**{"SCRAM-SHA-512": SCRAM_1}), makepath=True)
    # A version overwritten before capture's read would be reported skipped, not recorded:
    # the update comes once the create is on Kafka.
    changes.wait_for(lambda r: r["path"] == "/config/users/u", "the user's create")
    zk.create("/config/brokers/1", _config(**{
        "listener.name.sasl_ssl.ssl.keystore.password": PASSWORD, "log.cleaner.threads": "2"}),
        makepath=True)  # fmt: skip
    zk.set("/config/users/u", _config(**{"SCRAM-SHA-512": SCRAM_2, "producer_byte_rate": "9"}))


def _texts(records: list[dict[str, Any]]) -> str:
    return repr(records)


def _leaks(blob: bytes | str) -> list[str]:
    text = blob if isinstance(blob, str) else blob.decode("latin-1")
    return [s for s in SECRETS if s in text or s.encode().hex() in text]


def test_scram_credentials_and_passwords_reach_neither_kafka_nor_the_log_nor_the_tree(
    cluster: Any, zk_chroot: Any, start_capture: Any, tmp_path: Path
) -> None:
    changes = RawTopic(cluster.bootstrap_servers, f"zkcdc.changes.secrets-{tmp_path.name}")
    state_dir, event_log = tmp_path / "state", tmp_path / "events"
    daemon = start_capture(cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1",
                           "--event-log", str(event_log), state_dir=state_dir,
                           publish_to=changes)  # fmt: skip
    try:
        daemon.wait_logged("in sync")
        _write_secrets(zk_chroot, changes)

        def updated() -> list[dict[str, Any]]:
            changes.poll()
            return [
                r for r in changes.records if r["path"] == "/config/users/u" and r["op"] == "UPDATE"
            ]

        (update,) = wait_until(updated, 60, what="the SCRAM change on Kafka")  # type: ignore[misc]
        (event,) = update["events"]
        assert event["type"] == EventType.CONFIG_CHANGED
        assert event["changed_keys"] == ["SCRAM-SHA-512", "producer_byte_rate"]
        assert event["config_after"]["producer_byte_rate"] == "9"
        assert event["config_after"]["SCRAM-SHA-512"].startswith("zkcdc-redacted:")
        assert daemon.stop() == 0, daemon.tail()

        assert _leaks(_texts(changes.records)) == []
        assert all(_leaks(raw) == [] for raw in changes.raw)
        logged = list(read_records(event_log))
        assert {r["path"] for r in logged} >= {"/config/users/u", "/config/brokers/1"}
        assert _leaks(_texts(logged)) == []
        files = [*event_log.iterdir(), *state_dir.rglob("*")]
        tree_files = [f for f in files if f.name == "tree.avro"]
        assert tree_files, files
        with tree_files[0].open("rb") as stream:
            tree = list(fastavro.reader(stream))
        assert any(z["path"] == "/config/users/u" for z in tree)
        assert _leaks(_texts(tree)) == []
        assert all(_leaks(f.read_bytes()) == [] for f in files if f.is_file())
        assert _leaks(daemon.tail(10_000)) == []
    finally:
        changes.close()


def test_keep_secrets_records_them_as_zookeeper_holds_them(
    cluster: Any, zk_chroot: Any, start_capture: Any, changes_topic: ChangesTopic, tmp_path: Path
) -> None:
    event_log = tmp_path / "events"
    daemon = start_capture(cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1",
                           "--event-log", str(event_log), "--keep-secrets",
                           publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    _write_secrets(zk_chroot, changes_topic)
    changes_topic.wait_for(lambda r: r["op"] == "UPDATE", "the SCRAM change")
    assert daemon.stop() == 0, daemon.tail()
    assert SCRAM_2 in _texts(list(read_records(event_log)))
    assert any("--keep-secrets" in str(line.get("event")) for line in daemon.log_lines())
