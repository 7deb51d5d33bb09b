"""A file holding secrets that every user may read is named, with its mode, once; zkcdc goes on.
Group-readable (what zkcdc writes itself) and files without secrets pass in silence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zkcdc.ground import kafka_connection, metrics_server, secret_files, zookeeper_connection


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    monkeypatch.setattr(secret_files, "_warned", set())
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(secret_files.log, "warning", lambda text, **kw: said.append((text, kw)))
    return said


def _file(tmp_path: Path, name: str, text: str, mode: int) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode, warned", [(0o644, True), (0o604, True), (0o640, False),
                                          (0o600, False)])  # fmt: skip
def test_a_kafka_config_with_a_password_is_named_when_every_user_may_read_it(
    tmp_path: Path, _fresh: list[Any], mode: int, warned: bool
) -> None:
    path = _file(tmp_path, "client.properties", "bootstrap.servers=h:9092\n"
                 "security.protocol=SASL_PLAINTEXT\nsasl.password=s3cret\n", mode)  # fmt: skip
    kafka_connection.load(None, path, environ={})
    kafka_connection.load(None, path, environ={})  # once a file, not once a read
    assert len(_fresh) == (1 if warned else 0)
    if warned:
        text, fields = _fresh[0]
        assert str(path) in text and f"{mode:04o}" in text and "chmod 600" in text
        assert fields["holds"] == ["sasl.password"] and "s3cret" not in text


def test_a_kafka_config_without_secrets_may_be_read_by_anyone(
    tmp_path: Path, _fresh: list[Any]
) -> None:
    kafka_connection.load(None, _file(tmp_path, "c.properties", "bootstrap.servers=h:1\n", 0o644),
                          environ={})  # fmt: skip
    assert _fresh == []


@pytest.mark.parametrize("line", ["digest=user:pw", "sasl.password=pw", "ssl.key.password=pw"])
def test_a_zookeeper_config_with_a_secret_is_named(
    tmp_path: Path, _fresh: list[Any], line: str
) -> None:
    extra = "sasl.mechanism=DIGEST-MD5\nsasl.username=u\n" if line.startswith("sasl") else ""
    zookeeper_connection.load(
        _file(tmp_path, "zk.properties", f"{extra}{line}\n", 0o644), environ={}
    )
    assert [f["holds"] for _, f in _fresh] == [[line.partition("=")[0]]]


def test_a_web_config_with_password_hashes_and_its_tls_key_are_named(
    tmp_path: Path, _fresh: list[Any]
) -> None:
    _file(tmp_path, "key.pem", "-----BEGIN PRIVATE KEY-----\n", 0o644)
    _file(tmp_path, "cert.pem", "-----BEGIN CERTIFICATE-----\n", 0o644)
    web = _file(tmp_path, "web.yml", json.dumps({
        "tls_server_config": {"cert_file": "cert.pem", "key_file": "key.pem"},
        "basic_auth_users": {"u": "$2b$12$abcdefghijklmnopqrstuv"},
    }), 0o644)  # fmt: skip
    metrics_server.WebConfig.load(web)
    assert sorted(f["file"] for _, f in _fresh) == sorted([str(web), str(tmp_path / "key.pem")])


def test_the_command_line_says_it_on_stderr_and_runs_on(tmp_path: Path) -> None:
    path = _file(tmp_path, "client.properties",
                 "bootstrap.servers=127.0.0.1:1\nsasl.password=s3cret\n", 0o644)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "state", "show", "--kafka-config-file", str(path)],
        capture_output=True, text=True, timeout=120,
        env={"ZKCDC_CONNECT_TIMEOUT_S": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert f"(mode 0644): chmod 600 {path}" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout
    assert done.returncode != 0  # no Kafka there: the command itself goes on to say so
