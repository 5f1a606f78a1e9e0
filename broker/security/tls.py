"""TLS contexts from Kafka's PEM settings, for listeners (server side) and replica fetchers.

``ssl.keystore.location`` is one PEM file with the certificate chain and the private key
(Kafka's ``ssl.keystore.type = PEM``), the key optionally encrypted with ``ssl.key.password``;
``ssl.truststore.location`` is a PEM bundle of the CAs trusted to sign peers' certificates.
``ssl.client.auth``: ``none`` asks for no client certificate, ``requested`` verifies one if
given, ``required`` refuses a client without one. ``ssl.enabled.protocols`` bounds the TLS
versions (1.2 and 1.3 by default).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from tributary.protocol.secrets import Secret

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A certificate, key or CA file that does not load; the message names the file."""


def _load_keystore(context: ssl.SSLContext, keystore: Path, password: Secret | None, what: str) -> None:
    asked: list[bool] = []

    def passphrase() -> str:
        # A callable, never None: OpenSSL would otherwise prompt on the terminal for an
        # encrypted key, and a broker would hang at start-up.
        asked.append(True)
        return password.reveal() if password is not None else ""

    try:
        context.load_cert_chain(keystore, password=passphrase)
    except ssl.SSLError as exc:
        if asked:
            given = "is wrong" if password is not None else "is not set"
            raise TlsConfigError(
                f"{what}: the private key in {keystore} is encrypted and ssl.key.password {given}"
            ) from None
        raise TlsConfigError(
            f"{what}: {keystore} does not hold a PEM certificate chain and its private key: {exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise TlsConfigError(f"{what}: cannot read {keystore}: {exc.strerror or exc}") from None


def _load_truststore(context: ssl.SSLContext, truststore: Path, what: str) -> None:
    try:
        context.load_verify_locations(cafile=truststore)
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"{what}: {truststore} is not a PEM bundle of CA certificates: {exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise TlsConfigError(f"{what}: cannot read {truststore}: {exc.strerror or exc}") from None


def server_context(
    *,
    keystore: Path,
    key_password: Secret | None,
    truststore: Path | None,
    client_auth: str,
    versions: tuple[ssl.TLSVersion, ssl.TLSVersion],
    listener: str,
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = versions
    _load_keystore(context, keystore, key_password, f"listener {listener}: ssl.keystore.location")
    if truststore is not None:
        _load_truststore(context, truststore, f"listener {listener}: ssl.truststore.location")
    context.verify_mode = _VERIFY[client_auth]
    return context


def client_context(
    *,
    keystore: Path | None,
    key_password: Secret | None,
    truststore: Path | None,
    versions: tuple[ssl.TLSVersion, ssl.TLSVersion],
    check_hostname: bool,
    what: str,
) -> ssl.SSLContext:
    """A context for connecting to a TLS listener: peers verified against ``truststore`` (the
    system's CAs without one), host names checked unless told not to, and this side's own
    certificate offered when ``keystore`` is given (for listeners that require one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = versions
    if truststore is not None:
        _load_truststore(context, truststore, f"{what}: ssl.truststore.location")
    else:
        context.load_default_certs()
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if keystore is not None:
        _load_keystore(context, keystore, key_password, f"{what}: ssl.keystore.location")
    return context


__all__ = ["TlsConfigError", "client_context", "server_context"]
