"""Certificate authorities and certificates for TLS listeners and clients, in PEM files.

``CertificateAuthority.create(directory)`` makes a CA (an EC P-256 key and a self-signed
certificate, written as ``<name>-ca.pem``, its key as ``<name>-ca-key.pem``);
:meth:`CertificateAuthority.issue` makes a key and a certificate it signs, for a server (its host
names and IP addresses as subject alternative names) and for a client (its subject is what
``ssl.principal.mapping.rules`` maps), and writes them the ways Kafka's clients and brokers take
them: one PEM with the key and the chain (a broker's ``ssl.keystore.location``), and the
certificate and the key apart (librdkafka's ``ssl.certificate.location`` and
``ssl.key.location``). EC keys keep generation to a millisecond or two.

`tributary up` and `tributary demo` make their throw-away CA with it (deploy/appliance/secrets.py),
and the testing kit (``tributary.testing.tls``) its test CAs; Ansible makes an operator's CA with
``openssl`` instead (ansible/roles/pki), since the controller need not have this package.
``load`` reads a CA back, so that `tributary up` keeps its CA across restarts.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
_CA_USAGE = x509.KeyUsage(
    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
    key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False, decipher_only=False,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its key, in the files clients and brokers read."""

    #: Key and certificate chain in one PEM: a broker's ``ssl.keystore.location``.
    keystore: Path
    #: The certificate (and its CA) alone: librdkafka's ``ssl.certificate.location``.
    certificate: Path
    #: The private key alone (PKCS#8, encrypted with ``key_password`` if one was given).
    key: Path
    #: The subject, RFC 4514: ``CN=alice,OU=clients,O=Tributary``.
    subject: str


def _name(common_name: str, unit: str | None, organization: str) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)]
    if unit is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _write_secret(path: Path, data: bytes) -> None:
    """A key file readable by its owner only, from its first byte on."""
    path.unlink(missing_ok=True)
    path.touch(mode=0o600)
    path.write_bytes(data)


def subject_alternative_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """IP addresses as IP entries (what a client connecting to an address checks), names as DNS."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    name: str
    #: The CA's certificate (a truststore / ``ssl.ca.location``).
    path: Path
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    directory: Path
    #: ``O=`` of the certificates it issues.
    organization: str = "Tributary"

    @property
    def key_path(self) -> Path:
        return self.directory / f"{self.name}-ca-key.pem"

    @classmethod
    def create(
        cls, directory: Path, name: str = "tributary", *, organization: str = "Tributary", days: int = 30
    ) -> CertificateAuthority:
        """A new CA, valid from yesterday for ``days`` days, written under ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(f"Tributary {name} CA", None, organization)
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        path = directory / f"{name}-ca.pem"
        path.write_bytes(_pem(certificate))
        ca = cls(name, path, certificate, key, directory, organization)
        pem, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
        _write_secret(ca.key_path, key.private_bytes(pem, pkcs8, serialization.NoEncryption()))
        return ca

    @classmethod
    def load(cls, directory: Path, name: str = "tributary", *, organization: str = "Tributary") -> CertificateAuthority:
        """The CA ``create`` wrote there; OSError, ValueError or TypeError when it is missing or unreadable."""
        path = directory / f"{name}-ca.pem"
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
        key = serialization.load_pem_private_key((directory / f"{name}-ca-key.pem").read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{directory / f'{name}-ca-key.pem'} is not an EC key")
        return cls(name, path, certificate, key, directory, organization)

    def valid_for(self, seconds: float) -> bool:
        """Whether the CA is still valid ``seconds`` from now."""
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
        return bool(self.certificate.not_valid_after_utc > later)

    def issue(
        self,
        name: str,
        *,
        common_name: str | None = None,
        unit: str | None = None,
        hosts: Sequence[str] = DEFAULT_HOSTS,
        expired: bool = False,
        key_password: str | None = None,
        days: int = 30,
    ) -> Issued:
        """A certificate for ``name`` (its file names), usable by a server on ``hosts`` and as a
        client: subject ``CN=<common_name or name>[,OU=<unit>],O=<organization>``, valid from
        yesterday for ``days`` days (``expired``: its validity ended yesterday, for tests)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=days))
        )
        alternative = subject_alternative_names(hosts)
        subject = _name(common_name or name, unit, self.organization)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if alternative:
            builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password is not None
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        chain = _pem(certificate) + _pem(self.certificate)
        keystore = self.directory / f"{name}-keystore.pem"
        _write_secret(keystore, key_pem + chain)
        cert_path = self.directory / f"{name}-cert.pem"
        cert_path.write_bytes(chain)
        key_path = self.directory / f"{name}-key.pem"
        _write_secret(key_path, key_pem)
        return Issued(keystore, cert_path, key_path, subject.rfc4514_string())


__all__ = ["DEFAULT_HOSTS", "CertificateAuthority", "Issued", "subject_alternative_names"]
