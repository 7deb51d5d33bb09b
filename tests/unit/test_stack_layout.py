"""Ports, paths and config files of the stack are pure functions of its settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from zkcdc.stack import configs
from zkcdc.stack.layout import StackLayout
from zkcdc.stack.settings import StackSettings


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_default_layout_is_one_zookeeper_and_three_brokers_on_consecutive_ports(tmp_path: Path):
    layout = StackLayout.from_settings(StackSettings(state_dir=tmp_path))
    assert layout.zookeeper_connect == "127.0.0.1:2181/kafka"
    assert layout.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert [b.name for b in layout.brokers] == ["kafka-1", "kafka-2", "kafka-3"]
    assert layout.ports() == [
        ("zookeeper-1", 2181),
        ("kafka-1", 9092),
        ("kafka-2", 9093),
        ("kafka-3", 9094),
    ]


def test_an_ensemble_gets_distinct_client_quorum_and_election_ports(tmp_path: Path):
    settings = StackSettings(state_dir=tmp_path, zookeeper_nodes=3, zookeeper_port=30000)
    layout = StackLayout.from_settings(settings)
    ports = [port for _, port in layout.ports()]
    assert len(ports) == len(set(ports)) == 9 + 3
    assert layout.zookeeper_hosts == "127.0.0.1:30000,127.0.0.1:30001,127.0.0.1:30002"
    cfg = _props(configs.zookeeper_config(layout, layout.zookeepers[1], settings))
    assert cfg["clientPort"] == "30001"
    assert cfg["server.1"] == "127.0.0.1:30003:30006"
    assert cfg["server.3"] == "127.0.0.1:30005:30008"
    assert cfg["admin.enableServer"] == "false"


def test_a_single_zookeeper_has_no_server_lines(tmp_path: Path):
    settings = StackSettings(state_dir=tmp_path)
    layout = StackLayout.from_settings(settings)
    cfg = _props(configs.zookeeper_config(layout, layout.zookeepers[0], settings))
    assert not [k for k in cfg if k.startswith("server.")]
    # Kafka's session timeout must fit ZooKeeper's [2, 20] x tickTime window.
    assert (
        int(cfg["minSessionTimeout"])
        <= settings.session_timeout_ms
        <= int(cfg["maxSessionTimeout"])
    )


def test_broker_config_is_sized_to_the_broker_count_and_takes_overrides(tmp_path: Path):
    settings = StackSettings(state_dir=tmp_path, brokers=1, broker_config={"num.io.threads": "4"})
    layout = StackLayout.from_settings(settings)
    cfg = _props(configs.broker_config(layout, layout.brokers[0], settings))
    assert cfg["broker.id"] == "1"
    assert cfg["zookeeper.connect"] == "127.0.0.1:2181/kafka"
    assert cfg["offsets.topic.replication.factor"] == "1"
    assert cfg["transaction.state.log.min.isr"] == "1"
    assert cfg["zookeeper.session.timeout.ms"] == "6000"
    assert cfg["num.io.threads"] == "4"


@pytest.mark.parametrize("chroot", ["kafka", "/kafka/", "//kafka"])
def test_a_malformed_chroot_is_refused(chroot: str):
    with pytest.raises(ValidationError):
        StackSettings(chroot=chroot)


def test_settings_come_from_zkcdc_stack_env_vars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ZKCDC_STACK_BROKERS", "5")
    monkeypatch.setenv("ZKCDC_STACK_STATE_DIR", str(tmp_path))
    settings = StackSettings()
    assert settings.brokers == 5
    assert settings.state_dir == tmp_path


def test_each_migration_phase_configures_brokers_and_controllers_as_kafka_documents(
    tmp_path: Path,
) -> None:
    """Kafka 3.9's ZooKeeper-to-KRaft steps: controllers with migration and ZooKeeper; brokers
    first ZooKeeper brokers with migration and the quorum, then KRaft brokers; controllers
    finally without ZooKeeper."""

    def phase(migration: str) -> tuple[dict[str, str], dict[str, str] | None]:
        settings = StackSettings(state_dir=tmp_path, migration=migration, controllers=1)  # type: ignore[arg-type]
        layout = StackLayout.from_settings(settings)
        broker = _props(configs.broker_config(layout, layout.brokers[0], settings))
        controller = (
            _props(configs.controller_config(layout, layout.controllers[0], settings))
            if layout.controllers
            else None
        )
        return broker, controller

    broker, controller = phase("")
    assert controller is None and "zookeeper.metadata.migration.enable" not in broker
    broker, controller = phase("controllers")
    assert broker["broker.id"] == "1" and "controller.quorum.voters" not in broker
    assert controller is not None
    assert controller["zookeeper.metadata.migration.enable"] == "true"
    assert controller["zookeeper.connect"] == "127.0.0.1:2181/kafka"
    assert controller["process.roles"] == "controller" and controller["node.id"] == "101"
    broker, _ = phase("dual-write")
    assert broker["broker.id"] == "1" and broker["zookeeper.connect"] == "127.0.0.1:2181/kafka"
    assert broker["zookeeper.metadata.migration.enable"] == "true"
    assert broker["controller.quorum.voters"] == "101@127.0.0.1:9192"
    assert broker["inter.broker.protocol.version"] == "3.9"
    broker, controller = phase("kraft-brokers")
    assert broker["node.id"] == "1" and broker["process.roles"] == "broker"
    assert not {"broker.id", "zookeeper.connect", "zookeeper.metadata.migration.enable"} & set(
        broker
    )
    assert controller is not None and controller["zookeeper.metadata.migration.enable"] == "true"
    broker, controller = phase("finalized")
    assert broker["process.roles"] == "broker"
    assert controller is not None
    assert not {"zookeeper.connect", "zookeeper.metadata.migration.enable"} & set(controller)


def test_log_levels_of_the_settings_reach_every_process_log4j_config():
    props = _props(configs.log4j_config({"org.apache.kafka.raft.LeaderState": "DEBUG"}))
    assert props["log4j.logger.org.apache.kafka.raft.LeaderState"] == "DEBUG"
    assert props["log4j.rootLogger"] == "INFO, stdout"
    assert "log4j.logger.org.apache.kafka.raft.LeaderState" not in _props(configs.log4j_config())


def test_java_options_of_the_settings_reach_every_java_process_of_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from zkcdc.stack.cluster import LocalStack

    monkeypatch.setenv("ZKCDC_STACK_JAVA_OPTIONS", '["-XX:TieredStopAtLevel=1", "-Dx=1"]')
    stack = LocalStack(StackSettings(state_dir=tmp_path, cache_dir=tmp_path / "cache"))
    for name in ("zookeeper-1", "kafka-1", "kafka-3"):
        command = stack._command(name)
        assert command[0] == "java"
        at = command.index("-XX:TieredStopAtLevel=1")
        assert command[at + 1] == "-Dx=1" and at < command.index("-cp")
    monkeypatch.delenv("ZKCDC_STACK_JAVA_OPTIONS")
    assert StackSettings().java_options == ()  # none by default


def test_a_free_port_is_below_the_kernels_ephemeral_range_and_never_handed_out_twice():
    from zkcdc.stack import probes

    ports = [probes.free_port() for _ in range(50)]
    _low, top = probes.port_range()
    assert all(port < top for port in ports)
    assert top <= probes._ephemeral_ports_start()
    assert len(set(ports)) == len(ports)


def test_a_connection_to_its_own_port_is_not_a_server_answering(monkeypatch: pytest.MonkeyPatch):
    import socket

    import ui_harness

    from zkcdc.stack import probes

    port = probes.free_port()
    # What a poll of a port nothing listens on can get when the kernel gives the client that
    # same port: TCP's simultaneous open joins the socket to itself.
    own = socket.socket()
    own.bind(("127.0.0.1", port))
    own.connect(("127.0.0.1", port))
    assert own.getsockname() == own.getpeername()
    monkeypatch.setattr(socket, "create_connection", lambda *_args, **_kw: own)
    assert not ui_harness.answers(port)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.undo()
        assert ui_harness.answers(server.getsockname()[1])
