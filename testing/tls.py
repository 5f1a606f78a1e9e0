"""Throw-away certificate authorities and certificates for tests of TLS listeners and clients.

The product's own (``tributary.deploy.appliance.pki``, which `tributary up` uses too), with the
test defaults: a CA named ``test`` whose certificates say ``O=Tributary Tests``.
``CertificateAuthority.create(directory)`` makes the CA (``test-ca.pem``);
:meth:`CertificateAuthority.issue` makes a key and a certificate it signs, for a server (its host
names and IP addresses as subject alternative names) and for a client (its subject is what
``ssl.principal.mapping.rules`` maps), written as one PEM with the key and the chain (a broker's
``ssl.keystore.location``) and as the certificate and the key apart (librdkafka's
``ssl.certificate.location`` and ``ssl.key.location``). ``expired=True`` issues one whose
validity ended yesterday.
"""

from __future__ import annotations

from pathlib import Path

from tributary.deploy.appliance import pki
from tributary.deploy.appliance.pki import DEFAULT_HOSTS, Issued


class CertificateAuthority(pki.CertificateAuthority):
    __slots__ = ()

    @classmethod
    def create(
        cls, directory: Path, name: str = "test", *, organization: str = "Tributary Tests", days: int = 30
    ) -> CertificateAuthority:
        ca = pki.CertificateAuthority.create(directory, name, organization=organization, days=days)
        return cls(ca.name, ca.path, ca.certificate, ca.key, ca.directory, ca.organization)


__all__ = ["DEFAULT_HOSTS", "CertificateAuthority", "Issued"]
