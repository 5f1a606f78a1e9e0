"""Throw-away certificate authorities and certificates for tests of TLS listeners and clients.

``CertificateAuthority.create(directory)`` makes a CA (an EC P-256 key and a self-signed
certificate, written as ``<name>-ca.pem``); :meth:`CertificateAuthority.issue` makes a key and a
certificate it signs, for a server (its host names and IP addresses as subject alternative
names) and for a client (its subject is what ``ssl.principal.mapping.rules`` maps), and writes
them the ways Kafka's clients and brokers take them: one PEM with the key and the chain (a
broker's ``ssl.keystore.location``), and the certificate and the key apart (librdkafka's
``ssl.certificate.location`` and ``ssl.key.location``). ``expired=True`` issues one whose
validity ended yesterday. EC keys keep generation to a millisecond or two.
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
    #: The subject, RFC 4514: ``CN=alice,OU=clients,O=Tributary Tests``.
    subject: str


def _name(common_name: str, unit: str | None, organization: str) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)]
    if unit is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    name: str
    #: The CA's certificate (a truststore / ``ssl.ca.location``).
    path: Path
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    directory: Path

    @classmethod
    def create(cls, directory: Path, name: str = "test") -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(f"Tributary {name} CA", None, "Tributary Tests")
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        path = directory / f"{name}-ca.pem"
        path.write_bytes(_pem(certificate))
        return cls(name, path, certificate, key, directory)

    def issue(
        self,
        name: str,
        *,
        common_name: str | None = None,
        unit: str | None = None,
        hosts: Sequence[str] = DEFAULT_HOSTS,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        """A certificate for ``name`` (its file names), usable by a server on ``hosts`` and as a
        client: subject ``CN=<common_name or name>[,OU=<unit>],O=Tributary Tests``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        alternative: list[x509.GeneralName] = []
        for host in hosts:
            try:
                alternative.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alternative.append(x509.DNSName(host))
        subject = _name(common_name or name, unit, "Tributary Tests")
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
        keystore.write_bytes(key_pem + chain)
        cert_path = self.directory / f"{name}-cert.pem"
        cert_path.write_bytes(chain)
        key_path = self.directory / f"{name}-key.pem"
        key_path.write_bytes(key_pem)
        for path in (keystore, key_path):
            path.chmod(0o600)
        return Issued(keystore, cert_path, key_path, subject.rfc4514_string())


__all__ = ["DEFAULT_HOSTS", "CertificateAuthority", "Issued"]
