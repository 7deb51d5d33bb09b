"""docker-compose.yml describes ZooKeeper, three ZooKeeper-mode brokers and the zkcdc services."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _compose_cli() -> list[str] | None:
    """`docker compose` (v2 plugin) or `docker-compose` (v1), whichever this machine has."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def test_compose_file_has_zookeeper_three_brokers_and_zkcdc_services():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert set(services) == {"zookeeper", "kafka-1", "kafka-2", "kafka-3", "capture", "stream"}
    assert services["zookeeper"]["image"].startswith("confluentinc/cp-zookeeper:7.9.")
    ids, ports = set(), set()
    for n in (1, 2, 3):
        broker = services[f"kafka-{n}"]
        env = broker["environment"]
        assert broker["image"].startswith("confluentinc/cp-kafka:7.9.")
        assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181/kafka"
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        ids.add(env["KAFKA_BROKER_ID"])
        ports.update(broker["ports"])
    assert ids == {"1", "2", "3"}
    assert ports == {"9092:9092", "9093:9093", "9094:9094"}

    # Where a compose client exists (the docker CLI parses without an engine), it must agree.
    cli = _compose_cli()
    if cli is not None:
        result = subprocess.run(
            [*cli, "-f", str(COMPOSE), "config", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
