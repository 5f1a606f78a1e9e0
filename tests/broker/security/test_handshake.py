"""A TLS listener's handshake over in-memory streams: the principal a client certificate gives
(``ssl.principal.mapping.rules``), and every way the handshake fails (counted, logged, closed)."""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tributary.broker.connection_limits import RateLimitedLog
from tributary.broker.metrics import BrokerMetrics
from tributary.broker.security.config import ListenerConfig, SecurityConfigError, load_security
from tributary.broker.security.handshake import secure_connection
from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal
from tributary.testing.tls import CertificateAuthority, Issued

RULES = "RULE:^CN=([a-z]+),OU=clients,O=Tributary Tests$/$1/L,RULE:^CN=(.*),OU=ops.*$/ops-$1/U"


class Pki:
    def __init__(self, root: Path) -> None:
        self.ca = CertificateAuthority.create(root, "main")
        self.other = CertificateAuthority.create(root / "other", "other")
        self.broker = self.ca.issue("broker")
        self.alice = self.ca.issue("alice", unit="clients")
        self.ops = self.ca.issue("carol", unit="ops")
        self.nobody = self.ca.issue("nobody", unit="elsewhere")
        self.expired = self.ca.issue("old", unit="clients", expired=True)
        self.stranger = self.other.issue("mallory", unit="clients")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    yield Pki(tmp_path_factory.mktemp("pki"))


def listener(pki: Pki, client_auth: str, rules: str | None = None, protocol: str = "SSL") -> ListenerConfig:
    settings: dict[str, Any] = {
        "listeners": "TLS://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
        "listener.security.protocol.map": f"TLS:{protocol}",
        "ssl.keystore.location": str(pki.broker.keystore),
        "ssl.truststore.location": str(pki.ca.path),
        "ssl.client.auth": client_auth,
        "inter.broker.listener.name": "PLAINTEXT",
    }
    if rules is not None:
        settings["ssl.principal.mapping.rules"] = rules
    return load_security(settings, None, None).listener("TLS")


def client_context(pki: Pki, certificate: Issued | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca.path)
    if certificate is not None:
        context.load_cert_chain(certificate.certificate, certificate.key)
    return context


async def handshake(config: ListenerConfig, client: ssl.SSLContext | bytes | None) -> tuple[Any, BrokerMetrics]:
    """The server's result for a client speaking TLS with ``client`` (or sending raw bytes)."""
    metrics = BrokerMetrics()
    log = RateLimitedLog(logging.getLogger("test.auth"), 10.0, trio.current_time)
    client_end, server_end = trio.testing.memory_stream_pair()
    result: list[Any] = []

    async def serve() -> None:
        result.append(
            await secure_connection(config, server_end, "peer", lookup=lambda u, m: None, metrics=metrics, auth_log=log)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        if isinstance(client, ssl.SSLContext):
            tls = trio.SSLStream(client_end, client, server_hostname="127.0.0.1")
            try:
                await tls.do_handshake()
                # TLS 1.3: the server checks the client's certificate after the client's handshake
                # ends; a refusal shows on the next read.
                await tls.send_all(b"\0\0\0\0")
            except trio.BrokenResourceError:
                pass
        elif isinstance(client, bytes):
            await client_end.send_all(client)
            await client_end.aclose()
    return result[0], metrics


def _failures(metrics: BrokerMetrics) -> dict[tuple[str, str], int]:
    return metrics.authentication_failures


async def test_a_client_certificate_gives_the_mapped_principal(pki: Pki) -> None:
    config = listener(pki, "required", RULES)
    secured, metrics = await handshake(config, client_context(pki, pki.alice))
    assert secured is not None
    assert secured[1].principal == KafkaPrincipal("User", "alice")
    assert secured[1].listener == "TLS"
    secured, _ = await handshake(config, client_context(pki, pki.ops))
    assert secured[1].principal == KafkaPrincipal("User", "OPS-CAROL")  # U upper-cases the whole result, as in Kafka
    assert metrics.authentications == {("TLS", "SSL"): 1}


async def test_default_rule_gives_the_full_distinguished_name(pki: Pki) -> None:
    secured, _ = await handshake(listener(pki, "required"), client_context(pki, pki.alice))
    assert secured[1].principal == KafkaPrincipal("User", "CN=alice,OU=clients,O=Tributary Tests")


async def test_without_client_auth_the_principal_is_anonymous(pki: Pki) -> None:
    secured, _ = await handshake(listener(pki, "none"), client_context(pki, None))
    assert secured is not None and secured[1].principal == ANONYMOUS
    # "requested": a client without a certificate is let in as ANONYMOUS, one with a certificate is mapped.
    secured, _ = await handshake(listener(pki, "requested"), client_context(pki, None))
    assert secured is not None and secured[1].principal == ANONYMOUS
    secured, _ = await handshake(listener(pki, "requested"), client_context(pki, pki.alice))
    assert secured[1].principal.name.startswith("CN=alice")


async def test_sasl_ssl_listeners_take_the_principal_from_sasl_not_the_certificate(pki: Pki) -> None:
    secured, metrics = await handshake(listener(pki, "requested", protocol="SASL_SSL"), client_context(pki, pki.alice))
    assert secured is not None
    assert secured[1].principal == ANONYMOUS and secured[1].sasl is not None and not secured[1].authenticated
    assert metrics.authentications == {}


@pytest.mark.parametrize(
    ("client", "reason"),
    [
        ("none", "tls_handshake"),  # required, and no certificate offered
        ("expired", "tls_handshake"),
        ("stranger", "tls_handshake"),  # signed by a CA the listener does not trust
        ("nobody", "principal_mapping"),  # no rule maps its subject
        ("plaintext", "tls_handshake"),  # a Kafka request in the clear on a TLS port
        ("garbage", "tls_handshake"),
    ],
)
async def test_failed_handshakes_are_counted_and_closed(pki: Pki, client: str, reason: str) -> None:
    clients: dict[str, ssl.SSLContext | bytes] = {
        "none": client_context(pki, None),
        "expired": client_context(pki, pki.expired),
        "stranger": client_context(pki, pki.stranger),
        "nobody": client_context(pki, pki.nobody),
        "plaintext": bytes.fromhex("0000001a00120003000000010004746573740000000000000000"),
        "garbage": b"\x16\x03\x01\xff\xff" + b"\xaa" * 200,
    }
    secured, metrics = await handshake(listener(pki, "required", RULES), clients[client])
    assert secured is None
    assert _failures(metrics) == {("TLS", reason): 1}


def test_bad_tls_settings_are_refused_at_start(pki: Pki, tmp_path: Path) -> None:
    base = {
        "listeners": "TLS://127.0.0.1:9093",
        "listener.security.protocol.map": "TLS:SSL",
        "ssl.keystore.location": str(pki.broker.keystore),
    }
    assert load_security(base, None, None).listener("TLS").tls is not None
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    encrypted = pki.ca.issue("locked", key_password="open sesame")
    for change, message in (
        ({"ssl.keystore.location": None}, "set 'ssl.keystore.location'"),
        ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "is not a readable file"),
        ({"ssl.keystore.location": str(not_pem)}, "does not hold a PEM certificate chain"),
        ({"ssl.keystore.location": str(encrypted.keystore)}, "ssl.keystore.location"),
        ({"ssl.keystore.location": str(encrypted.keystore), "ssl.key.password": "wrong"}, "ssl.key.password"),
        ({"ssl.client.auth": "required"}, "needs 'ssl.truststore.location'"),
        ({"ssl.client.auth": "maybe"}, "must be one of none, requested, required"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1 is not among"),
        ({"ssl.keystore.type": "JKS"}, "only PEM"),
        ({"ssl.principal.mapping.rules": "RULE:^(unclosed/$1/"}, "invalid pattern"),
    ):
        settings = {**base, **{k: v for k, v in change.items() if v is not None}}
        for k, v in change.items():
            if v is None:
                settings.pop(k)
        with pytest.raises(SecurityConfigError, match=message.replace("(", r"\(")):
            load_security(settings, None, None)
    # The right password opens the encrypted key; it never shows in the config's repr.
    (tmp_path / "pw").write_text("open sesame\n")
    good = load_security(
        {**base, "ssl.keystore.location": str(encrypted.keystore), "ssl.key.password": f"${{file:{tmp_path / 'pw'}}}"},
        None,
        None,
    )
    assert "open sesame" not in repr(good) and "open sesame" not in json.dumps(str(good))
