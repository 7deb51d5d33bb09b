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
import json
import re
from collections.abc import Callable
from typing import Any

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
# A secret key's name anywhere in data no JSON reader takes (where keys cannot be found).
_SECRET_WORD = re.compile(
    rb"password|secret|sasl\.jaas\.config|ssl\.keystore\.key|ssl\.keystore\.certificate"
    rb"|ssl\.truststore\.certificates|master\.key|scram-",
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
        entity_type = match["type"]
        read_exactly = False  # orjson reads an integer past 64 bits as a float
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            # orjson refuses what Python's json reads (1e400, NaN, nesting past 1024); what
            # neither reads is kept only where no secret can be in it.
            obj, read_exactly = _python_json(data), True
            if obj is None:
                return self._unreadable(path, data)
        config = obj.get("config") if isinstance(obj, dict) else None
        if not isinstance(config, dict):
            return data
        secret = [k for k in config if is_secret_key(entity_type, k)]
        if not secret:
            return data
        for key in secret:
            config[key] = self.marker(path, key, config[key])
        try:
            # Rewritten from Python's json, which keeps every other value exactly: orjson reads
            # an integer past 64 bits as a float (a fuzzed config found it).
            exact = obj if read_exactly else json.loads(data)
            exact["config"].update((key, config[key]) for key in secret)
            text = json.dumps(exact, ensure_ascii=False, separators=(",", ":"))
            return text.encode("utf-8", "surrogatepass")
        except RecursionError:  # nested deeper than Python's json goes: orjson's reading
            return _written(obj)

    def _unreadable(self, path: str, data: bytes) -> bytes:
        """Data no JSON reader takes: kept as it is (decoded as UNPARSEABLE) unless it names
        a secret key (so may hold its value), when the whole becomes one marker."""
        if not _SECRET_WORD.search(data):
            return data
        return self.marker(path, "", data.decode("utf-8", "surrogateescape")).encode()

    def marker(self, path: str, key: str, value: object) -> str:
        if isinstance(value, str):
            text = value
        else:
            try:
                text = orjson.dumps(value).decode()
            except TypeError:  # past 64 bits or 254 levels, which orjson does not write
                text = _text(value)
        message = "\0".join((path, key, text)).encode("utf-8", "surrogatepass")
        return MARKER + hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]


def _python_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _text(value: object) -> str:
    try:
        return json.dumps(value, separators=(",", ":"))
    except RecursionError:  # hostile nesting: said, not written
        return f"<a {type(value).__name__} nested too deep to write>"


def _written(obj: dict[str, Any]) -> bytes:
    """`obj` as JSON as well as it can be written: a value too deep for orjson (254 levels)
    becomes its text."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        config = {k: _writable(v) for k, v in obj["config"].items()}
        return orjson.dumps({k: config if k == "config" else _writable(v) for k, v in obj.items()})


def _writable(value: object) -> object:
    try:
        orjson.dumps(value)
    except TypeError:
        return _text(value)
    return value


Redact = Callable[[str, bytes | None], bytes | None]
DEFAULT_REDACTOR = Redactor()


def keep_all(path: str, data: bytes | None) -> bytes | None:
    """No redaction (`keep_secrets`: forensic captures whose files are guarded as secrets)."""
    return data
