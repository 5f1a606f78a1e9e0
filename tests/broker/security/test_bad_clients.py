"""Bad input and wrong credentials against a live broker, each beside a bystander that keeps
producing over SASL_SSL: the connection closes with the protocol's error where it has one
(SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, a TLS alert), a log line says why, a
metric counts it, and nothing else changes."""

from __future__ import annotations

import base64
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.fixtures.security import SecureCluster, start_secure_cluster
from tests.fixtures.zookeeper import server_chroot
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tributary.protocol.sasl.scram import SCRAM_SHA_512, ScramClient
from tributary.testing.polling import eventually
from tributary.testing.wire import WireConnection
from tributary.testing.zookeeper import ZooKeeperServer

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def secure(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from start_secure_cluster(
        server_chroot(zookeeper_server, "bad"), tmp_path_factory.mktemp("bad-clients"), metrics=True
    )


class Bystander:
    """A producer over SASL_SSL that keeps writing while a test misbehaves beside it."""

    def __init__(self, secure: SecureCluster) -> None:
        self.producer = Producer({**secure.client("scram"), "linger.ms": 5})
        self.acknowledged = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, _message: object) -> None:
        if error is None:
            self.acknowledged += 1
        else:
            self.errors.append(str(error))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce("bystander", value=b"still here", on_delivery=self._delivered)
            self.producer.poll(0.02)

    def __enter__(self) -> Bystander:
        self._thread.start()
        eventually(lambda: self.acknowledged > 0, TIMEOUT, "the bystander's first acknowledgement")
        return self

    def __exit__(self, *exc: object) -> None:
        before = self.acknowledged
        # Still acknowledged after the misbehaviour: the broker serves it as before.
        eventually(lambda: self.acknowledged > before + 10, TIMEOUT, "the bystander's writes after the test")
        self._stop.set()
        self._thread.join()
        assert self.producer.flush(TIMEOUT) == 0
        assert self.errors == []


@pytest.fixture
def bystander(secure: SecureCluster) -> Iterator[Bystander]:
    with Bystander(secure) as running:
        yield running


def metric(secure: SecureCluster, name: str, **labels: str) -> float:
    port = secure.cluster.brokers[0].metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = (
        re.compile(rf"^{re.escape(name)}(?:\{{{re.escape(wanted)}\}})? ([0-9.e+]+)$", re.M)
        if labels
        else (re.compile(rf"^{re.escape(name)} ([0-9.e+]+)$", re.M))
    )
    found = pattern.search(text)
    return float(found.group(1)) if found else 0.0


def failures(secure: SecureCluster, listener: str, reason: str) -> float:
    return metric(secure, "tributary_broker_failed_authentication_total", listener=listener, reason=reason)


def log_lines(secure: SecureCluster, text: str) -> int:
    return Path(secure.cluster.brokers[0].log_path).read_text().count(text)


def expect_counted(
    secure: SecureCluster, listener: str, reason: str, log_text: str, act: Callable[[], None], *, retries: bool = False
) -> None:
    """``act`` makes one failure (or, for a client that retries, some): the metric goes up by
    as many and the log says ``log_text``."""
    before, lines = failures(secure, listener, reason), log_lines(secure, log_text)
    act()
    if retries:
        eventually(lambda: failures(secure, listener, reason) > before, 10, f"{listener}/{reason} counted")
    else:
        eventually(lambda: failures(secure, listener, reason) == before + 1, 10, f"{listener}/{reason} counted")
    eventually(lambda: log_lines(secure, log_text) > lines, 10, f"a log line with {log_text!r}")


def tls_context(secure: SecureCluster, certificate: object = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=secure.pki.ca.path)
    if certificate is not None:
        context.load_cert_chain(certificate.certificate, certificate.key)  # type: ignore[attr-defined]
    return context


def sasl_ssl(secure: SecureCluster) -> WireConnection:
    return WireConnection(*secure.cluster.brokers[0].listener_address("SECURE"), ssl_context=tls_context(secure))


def assert_closed(conn: WireConnection) -> None:
    with pytest.raises((ConnectionError, OSError)):
        conn.request(ApiVersionsRequest(), 3)


def scram_exchange(conn: WireConnection, user: str, password: str, tamper: str = "") -> object:
    assert conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
    client = ScramClient(SCRAM_SHA_512, user, password)
    first = conn.request(SaslAuthenticateRequest(auth_bytes=client.first()), 2)
    assert first.error_code == 0
    final = client.final(first.auth_bytes)
    if tamper == "nonce":
        final = final.replace(b",r=", b",r=x", 1)
    elif tamper == "proof":
        head, _, proof = final.rpartition(b",p=")
        flipped = bytearray(base64.b64decode(proof))
        flipped[-1] ^= 0x80
        final = head + b",p=" + base64.b64encode(bytes(flipped))
    return conn.request(SaslAuthenticateRequest(auth_bytes=final), 2)


INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


WRONG = {
    "wrong-password": ("alice", "guess", "", "user 'alice': wrong password"),
    "unknown-user": ("mallory", "whatever", "", "unknown user 'mallory'"),
    "tampered-nonce": ("alice", "alice-secret", "nonce", "nonce is not the one agreed"),
    "tampered-proof": ("alice", "alice-secret", "proof", "user 'alice': wrong password"),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_wrong_credentials_get_sasl_authentication_failed(
    secure: SecureCluster, bystander: Bystander, case: str
) -> None:
    user, password, tamper, log_text = WRONG[case]
    reason = "malformed" if tamper == "nonce" else "bad_credentials"

    def act() -> None:
        with sasl_ssl(secure) as conn:
            answer = scram_exchange(conn, user, password, tamper)
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
            assert answer.error_message == INVALID  # type: ignore[attr-defined]
            assert_closed(conn)

    expect_counted(secure, "SECURE", reason, log_text, act)


def test_a_real_client_with_a_wrong_password_is_told_so(secure: SecureCluster, bystander: Bystander) -> None:
    seen: list[KafkaError] = []
    client = {**secure.client("scram"), "sasl.password": "guess", "error_cb": seen.append}

    def act() -> None:
        producer = Producer(client)
        eventually(
            lambda: producer.poll(0.1) >= 0 and any(e.code() == KafkaError._AUTHENTICATION for e in seen),
            TIMEOUT,
            "the client's authentication error",
        )

    expect_counted(secure, "SECURE", "bad_credentials", "user 'alice': wrong password", act, retries=True)
    assert INVALID in next(e.str() for e in seen if e.code() == KafkaError._AUTHENTICATION)


def test_an_unknown_mechanism_gets_the_enabled_ones(secure: SecureCluster, bystander: Bystander) -> None:
    def act() -> None:
        with sasl_ssl(secure) as conn:
            answer = conn.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)
            assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert answer.mechanisms == ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
            assert_closed(conn)

    expect_counted(secure, "SECURE", "unsupported_mechanism", "unsupported SASL mechanism 'OAUTHBEARER'", act)


def test_requests_before_authentication_close_the_connection(secure: SecureCluster, bystander: Bystander) -> None:
    def act() -> None:
        with sasl_ssl(secure) as conn:
            assert conn.request(ApiVersionsRequest(), 3).error_code == 0  # allowed before authenticating
            with pytest.raises((ConnectionError, OSError)):
                conn.request(MetadataRequest(topics=None), 8)

    before = failures(secure, "SECURE", "illegal_state")
    act()
    eventually(lambda: failures(secure, "SECURE", "illegal_state") == before + 1, 10, "counted")
    assert log_lines(secure, "METADATA on listener SECURE before SASL authentication completed") >= 1


def test_a_plaintext_client_on_a_tls_port(secure: SecureCluster, bystander: Bystander) -> None:
    def act() -> None:
        address = secure.cluster.brokers[0].listener_address("SECURE")
        with WireConnection(*address) as conn, pytest.raises((ConnectionError, OSError)):
            conn.request(ApiVersionsRequest(), 3)

    expect_counted(secure, "SECURE", "tls_handshake", "on listener SECURE from", act)


def test_a_tls_client_on_a_plaintext_port(secure: SecureCluster, bystander: Bystander) -> None:
    address = secure.cluster.brokers[0].address
    before = metric(secure, "tributary_broker_connections_closed_invalid_total")
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)), socket.create_connection(address, timeout=10) as sock:
        tls_context(secure).wrap_socket(sock, server_hostname="127.0.0.1")
    eventually(lambda: metric(secure, "tributary_broker_connections_closed_invalid_total") == before + 1, 10, "counted")
    assert log_lines(secure, "bytes exceeds the limit of") >= 1
    # And on the SASL_PLAINTEXT port, before any authentication: a failed authentication.
    expect_counted(secure, "SASLPLAIN", "malformed", "before SASL authentication", lambda: _tls_to(secure, "SASLPLAIN"))


def _tls_to(secure: SecureCluster, listener: str) -> None:
    address = secure.cluster.brokers[0].listener_address(listener)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)), socket.create_connection(address, timeout=10) as sock:
        tls_context(secure).wrap_socket(sock, server_hostname="127.0.0.1")


@pytest.mark.parametrize(
    ("which", "alert"),
    [("expired", "CERTIFICATE_EXPIRED"), ("stranger", "UNKNOWN_CA"), ("none", "CERTIFICATE_REQUIRED")],
)
def test_bad_client_certificates_on_the_mutual_tls_port(
    secure: SecureCluster, bystander: Bystander, which: str, alert: str
) -> None:
    pki = secure.pki
    certificate = {
        "expired": pki.ca.issue("old-alice", unit="clients", expired=True),
        "stranger": pki.ca.__class__.create(pki.root / "stranger", "stranger").issue("mallory", unit="clients"),
        "none": None,
    }[which]

    def act() -> None:
        context = tls_context(secure, certificate)
        with pytest.raises(ssl.SSLError, match=alert):
            conn = WireConnection(*secure.cluster.brokers[0].listener_address("MTLS"), ssl_context=context)
            with conn:
                conn.request(ApiVersionsRequest(), 3)  # TLS 1.3: the server's verdict comes with the first read

    expect_counted(secure, "MTLS", "tls_handshake", "on listener MTLS from", act)


@pytest.mark.parametrize("listener", ["SECURE", "MTLS"])
def test_garbage_in_place_of_a_tls_handshake(secure: SecureCluster, bystander: Bystander, listener: str) -> None:
    def act() -> None:
        with socket.create_connection(secure.cluster.brokers[0].listener_address(listener), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01\x00\x05hello" + bytes(range(256)) * 4)
            sock.settimeout(10)
            while sock.recv(4096):
                pass

    expect_counted(secure, listener, "tls_handshake", f"on listener {listener} from", act)


def test_garbage_in_place_of_a_sasl_handshake(secure: SecureCluster, bystander: Bystander) -> None:
    def act() -> None:
        with socket.create_connection(secure.cluster.brokers[0].listener_address("SASLPLAIN"), timeout=10) as sock:
            sock.sendall(b"\x00\x00\x00\x08\x00\x11garbage!")
            sock.settimeout(10)
            while sock.recv(4096):
                pass

    before = failures(secure, "SASLPLAIN", "malformed") + failures(secure, "SASLPLAIN", "illegal_state")
    act()
    eventually(
        lambda: (
            failures(secure, "SASLPLAIN", "malformed") + failures(secure, "SASLPLAIN", "illegal_state") == before + 1
        ),
        10,
        "counted",
    )


def test_nothing_else_changed(secure: SecureCluster) -> None:
    """After all of the above: the only topic is the bystander's, the broker still serves."""
    topics = AdminClient(secure.client("scram")).list_topics(timeout=TIMEOUT).topics
    assert set(topics) - {"__consumer_offsets"} == {"bystander"}
    assert secure.cluster.brokers[0].proc is not None and secure.cluster.brokers[0].proc.poll() is None
    time.sleep(0)
