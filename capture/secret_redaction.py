"""Secrets Kafka keeps in ZooKeeper never leave capture as they are.

`/config/users/<u>` holds SCRAM credentials (salt, stored and server key: enough to log in as
<u> against any broker of the cluster), and broker configs may hold passwords (Kafka encrypts
them with `password.encoder.secret`, but that secret can sit in a broker's config file). Their
values are replaced, in the znode data itself and so in records, event logs, `tree.avro` and
Kafka, by a keyed digest: the same value gives the same marker, another value another, so
`CONFIG_CHANGED` still names the keys that changed. Everything else stays byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable

import orjson

MARKER = "zkcdc-redacted:hmac-sha256:"

# Config keys of the password type in Kafka's ConfigDefs (broker, listener and client
# configs), matched at the end so listener- and mechanism-prefixed forms are found too
# (`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`).
_SECRET_KEY = re.compile(
    r"(password|secret|sasl\.jaas\.config|ssl\.keystore\.key|ssl\.keystore\.certificate\.chain"
    r"|ssl\.truststore\.certificates|secret\.key|master\.key)$",
    re.IGNORECASE,
)
# `/config/<type>/<name>` and `/config/users/<u>/clients/<c>`; not `/config/changes/...`.
_CONFIG_PATH = re.compile(r"/config/(?P<type>topics|brokers|users|clients|ips)/.+")


def is_secret_key(entity_type: str, key: str) -> bool:
    """Whether a config key of an entity of `entity_type` holds a secret."""
    if entity_type == "users" and key.upper().startswith("SCRAM-"):
        return True
    return bool(_SECRET_KEY.search(key))


class Redactor:
    """`data(path, bytes)`: the znode's data with its secrets replaced. `key` makes the digest
    a keyed one (set the same on every daemon of a cluster, or digests differ after a failover);
    without it the digest still hides the value, which Kafka stores as high-entropy
    ciphertext or SCRAM keys, from any reader without a way to guess it."""

    def __init__(self, key: bytes = b"zkcdc") -> None:
        self._key = key

    def data(self, path: str, data: bytes | None) -> bytes | None:
        if not path.startswith("/config/"):
            return data  # every read passes here: the common case costs one prefix test
        match = _CONFIG_PATH.fullmatch(path)
        if match is None or not data:
            return data
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data  # not Kafka's format: decoded as UNPARSEABLE, nothing to find
        config = obj.get("config") if isinstance(obj, dict) else None
        if not isinstance(config, dict):
            return data
        entity_type = match["type"]
        secret = [k for k in config if is_secret_key(entity_type, k)]
        if not secret:
            return data
        for key in secret:
            config[key] = self.marker(path, key, config[key])
        return orjson.dumps(obj)

    def marker(self, path: str, key: str, value: object) -> str:
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        message = "\0".join((path, key, text)).encode("utf-8", "surrogatepass")
        return MARKER + hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]


Redact = Callable[[str, bytes | None], bytes | None]
DEFAULT_REDACTOR = Redactor()


def keep_all(path: str, data: bytes | None) -> bytes | None:
    """No redaction (`keep_secrets`: forensic captures whose files are guarded as secrets)."""
    return data
