"""Every ZooKeeper client of zkcdc is built here (capture's tree reader and election, simulate,
the stack's probes): the connect string plus how to prove who we are (digest or SASL) and TLS.

Where it comes from, later ones winning: a properties file (`--zookeeper-config-file`, e.g. the
one `zkcdc stack up --secure` writes), `ZKCDC_ZOOKEEPER_*` environment variables
(`ZKCDC_ZOOKEEPER_SASL_PASSWORD`...), then the command line's connect string. Names:

    ssl=true                      TLS (ZooKeeper's secureClientPort)
    ssl.ca.location=ca.pem        the CA that signed the servers' certificates
    ssl.certificate.location=..   a client certificate (servers with ssl.clientAuth=need)
    ssl.key.location=..
    ssl.key.password=..
    sasl.mechanism=DIGEST-MD5     SASL (ZooKeeper's SASLAuthenticationProvider); GSSAPI too
    sasl.username=kafka
    sasl.password=..
    digest=user:password          the digest scheme (addauth digest)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.security import ACL, make_acl, make_digest_acl
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from zkcdc.ground.cli_options import invalid_setting
from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.kafka_connection import read_properties
from zkcdc.ground.secret_files import check_secret_file

ENV_PREFIX = "ZKCDC_ZOOKEEPER_"
_NAMES = {
    "ssl": "ssl",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.password": "ssl_key_password",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "digest": "digest",
}


class ZooKeeperConnectionError(ZkcdcError):
    pass


class ZooKeeperAccess(BaseModel):
    """How to connect and authenticate (the connect string travels on its own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ssl: bool = False
    ssl_ca_location: Path | None = None
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: SecretStr | None = None
    sasl_mechanism: Literal["DIGEST-MD5", "GSSAPI"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    digest: SecretStr | None = None  # user:password

    def kazoo(self) -> dict[str, Any]:
        """KazooClient's keyword arguments (secrets revealed here only)."""
        kwargs: dict[str, Any] = {}
        if self.digest is not None:
            kwargs["auth_data"] = [("digest", self.digest.get_secret_value())]
        if self.sasl_mechanism is not None:
            options: dict[str, Any] = {"mechanism": self.sasl_mechanism}
            if self.sasl_username is not None:
                options["username"] = self.sasl_username
            if self.sasl_password is not None:
                options["password"] = self.sasl_password.get_secret_value()
            kwargs["sasl_options"] = options
        if self.ssl:
            kwargs.update(use_ssl=True, verify_certs=True, check_hostname=True)
            if self.ssl_ca_location is not None:
                kwargs["ca"] = str(self.ssl_ca_location)
            if self.ssl_certificate_location is not None:
                kwargs["certfile"] = str(self.ssl_certificate_location)
            if self.ssl_key_location is not None:
                kwargs["keyfile"] = str(self.ssl_key_location)
            if self.ssl_key_password is not None:
                kwargs["keyfile_password"] = self.ssl_key_password.get_secret_value()
        return kwargs

    def own_acl(self) -> list[ACL] | None:
        """The ACL of znodes zkcdc creates for itself (the election): changed or deleted only
        by this identity, read by anyone. None without authentication (ZooKeeper's open one)."""
        anyone_reads = make_acl("world", "anyone", read=True)
        if self.sasl_username is not None and self.sasl_mechanism is not None:
            return [make_acl("sasl", self.sasl_username, all=True), anyone_reads]
        if self.digest is not None:
            user, _, password = self.digest.get_secret_value().partition(":")
            return [make_digest_acl(user, password, all=True), anyone_reads]
        return None

    def client(self, hosts: str, timeout_s: float, own_nodes: bool = False, **kw: Any) -> Any:
        """An unstarted KazooClient for `hosts` (with or without a chroot)."""
        try:
            return KazooClient(
                hosts=hosts,
                timeout=timeout_s,
                default_acl=self.own_acl() if own_nodes else None,
                logger=kw.pop("logger", None),
                **self.kazoo(),
                **kw,
            )
        except ValueError as exc:
            raise ZooKeeperConnectionError(
                f"bad ZooKeeper connect string {hosts!r}: {exc}"
            ) from exc

    def describe(self) -> str:
        """How it connects, for messages ("" for plain; never a secret)."""
        how = ["TLS"] if self.ssl else []
        if self.sasl_mechanism:
            how.append(f"SASL {self.sasl_mechanism} as {self.sasl_username}")
        elif self.digest is not None:
            how.append("digest as " + self.digest.get_secret_value().partition(":")[0])
        return ", ".join(how)


def load(
    config_file: Path | None = None,
    digest: SecretStr | None = None,
    environ: Mapping[str, str] | None = None,
) -> ZooKeeperAccess:
    environ = os.environ if environ is None else environ
    config_file = config_file or _path(environ.get(ENV_PREFIX + "CONFIG_FILE"))
    properties = read_properties(config_file) if config_file is not None else {}
    if config_file is not None:
        check_secret_file(config_file, [n for n in properties if n in _SECRET_NAMES])
    for name in _NAMES:
        value = environ.get(ENV_PREFIX + name.replace(".", "_").upper())
        if value is not None:
            properties[name] = value
    unknown = sorted(set(properties) - set(_NAMES))
    if unknown:
        raise ZooKeeperConnectionError(
            f"unknown ZooKeeper setting {unknown[0]} (known: {', '.join(_NAMES)})"
        )
    values: dict[str, Any] = {_NAMES[k]: v for k, v in properties.items()}
    if digest is not None:
        values["digest"] = digest
    try:
        return ZooKeeperAccess(**values)
    except ValidationError as exc:
        raise ZooKeeperConnectionError(f"ZooKeeper connection: {invalid_setting(exc)}") from exc


_SECRET_NAMES = ("sasl.password", "ssl.key.password", "digest")


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def split_hosts(connect: str) -> tuple[str, str]:
    """`h1:2181,h2:2181/kafka` -> (`h1:2181,h2:2181`, `/kafka`)."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/") if chroot else ""
