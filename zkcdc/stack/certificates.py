"""A throwaway certificate authority for the secured local stack (and tests): a CA and
certificates for loopback names, written as PEM files only their owner can read."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from zkcdc.ground.private_files import atomic_write

VALID_FOR = datetime.timedelta(days=30)


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True)
class KeyPair:
    certificate: Path  # PEM
    key: Path  # PEM, PKCS#8, unencrypted (the file's mode is its protection)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    atomic_write(path, pem, mode=0o600)


class CertificateAuthority:
    def __init__(self, folder: Path, name: str = "zkcdc local stack CA") -> None:
        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.certificate = folder / "ca.pem"
        atomic_write(self.certificate, self._cert.public_bytes(serialization.Encoding.PEM), 0o644)

    def issue(self, name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> KeyPair:
        """A server-and-client certificate for `hosts` (IPs and DNS names), signed by the CA;
        also `<name>-bundle.pem`: key then certificate chain, as Kafka's PEM keystore wants."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        pair = KeyPair(self.folder / f"{name}.pem", self.folder / f"{name}-key.pem")
        chain = cert.public_bytes(serialization.Encoding.PEM) + self._cert.public_bytes(
            serialization.Encoding.PEM
        )
        atomic_write(pair.certificate, chain, 0o644)
        _write_key(pair.key, key)
        key_pem = pair.key.read_bytes()
        atomic_write(self.folder / f"{name}-bundle.pem", key_pem + chain, mode=0o600)
        return pair
