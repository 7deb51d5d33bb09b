"""`zkcdc stack up --secure`: what a secured cluster is made of, made on the fly.

A CA and one certificate for the loopback servers; random passwords; JAAS files for ZooKeeper
(DIGEST-MD5 users) and for the brokers' ZooKeeper client; the SCRAM-SHA-512 credentials Kafka
reads from ZooKeeper; and, for zkcdc's own commands, `client.properties` (Kafka) and
`zookeeper.properties` (ZooKeeper) with everything they need. Secrets live only in files of
mode 0600 under `<state>/secure`, never on a command line."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from zkcdc.ground.kafka_connection import jaas_login, jaas_quote
from zkcdc.ground.private_files import atomic_write
from zkcdc.stack.certificates import CertificateAuthority

BROKER_ZK_USER = "kafka"  # the brokers' ZooKeeper identity (zookeeper.set.acl=true)
INTER_BROKER_USER = "admin"  # SCRAM user between brokers
CLIENT_USER = "zkcdc"  # SCRAM user of zkcdc's Kafka clients
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class SecureMaterial:
    folder: Path
    passwords: dict[str, str]

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def server_bundle(self) -> Path:
        """Key then certificate chain: Kafka's and ZooKeeper's PEM keystore."""
        return self.folder / "server-bundle.pem"

    @property
    def zookeeper_jaas(self) -> Path:
        return self.folder / "zookeeper-jaas.conf"

    @property
    def broker_jaas(self) -> Path:
        return self.folder / "kafka-jaas.conf"

    @property
    def kafka_properties(self) -> Path:
        return self.folder / "client.properties"

    @property
    def zookeeper_properties(self) -> Path:
        return self.folder / "zookeeper.properties"

    @classmethod
    def create(cls, folder: Path, bootstrap_servers: str) -> SecureMaterial:
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        passwords = {
            name: secrets.token_urlsafe(18)
            for name in (BROKER_ZK_USER, INTER_BROKER_USER, CLIENT_USER)
        }
        material = cls(folder, passwords)
        ca = CertificateAuthority(folder)
        ca.issue("server")
        atomic_write(folder / "passwords.json", json.dumps(passwords), mode=0o600)
        zk_user = jaas_quote(passwords[BROKER_ZK_USER])
        atomic_write(
            material.zookeeper_jaas,
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f'  user_{BROKER_ZK_USER}="{zk_user}";\n}};\n',
            mode=0o600,
        )
        atomic_write(
            material.broker_jaas,
            "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f'  username="{BROKER_ZK_USER}"\n  password="{zk_user}";\n}};\n',
            mode=0o600,
        )
        atomic_write(
            material.kafka_properties,
            "# zkcdc's Kafka connection to the secured local stack (--kafka-config-file)\n"
            f"bootstrap.servers={bootstrap_servers}\nsecurity.protocol=SASL_SSL\n"
            f"sasl.mechanism=SCRAM-SHA-512\nsasl.username={CLIENT_USER}\n"
            f"sasl.password={passwords[CLIENT_USER]}\nssl.ca.location={material.ca}\n",
            mode=0o600,
        )
        atomic_write(
            material.zookeeper_properties,
            "# zkcdc's ZooKeeper connection to the secured local stack (--zookeeper-config-file)\n"
            f"ssl=true\nssl.ca.location={material.ca}\nsasl.mechanism=DIGEST-MD5\n"
            f"sasl.username={BROKER_ZK_USER}\nsasl.password={passwords[BROKER_ZK_USER]}\n",
            mode=0o600,
        )
        return material

    @classmethod
    def load(cls, folder: Path) -> SecureMaterial:
        passwords = json.loads((folder / "passwords.json").read_text())
        return cls(folder, dict(passwords))

    def broker_jaas_line(self) -> str:
        """The SCRAM login of the inter-broker listener (in server.properties, mode 0600)."""
        login = jaas_login("SCRAM-SHA-512", INTER_BROKER_USER, self.passwords[INTER_BROKER_USER])
        assert login is not None
        return login


def scram_credential(password: str, iterations: int = SCRAM_ITERATIONS) -> str:
    """Kafka's stored form of a SCRAM-SHA-512 credential (RFC 5802), as /config/users holds it."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    stored_key = hashlib.sha512(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha512).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return (
        f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},"
        f"iterations={iterations}"
    )


def scram_user_znode(password: str) -> bytes:
    return json.dumps(
        {"version": 1, "config": {"SCRAM-SHA-512": scram_credential(password)}}
    ).encode()
