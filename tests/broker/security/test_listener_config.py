"""The broker's listener, TLS and SASL settings as Kafka names them, read from its TOML file:
what each combination gives, and one line naming the setting for each mistake."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tributary.broker.config import ConfigError, HostPort, load
from tributary.broker.security.listeners import Endpoint
from tributary.broker.security.user_configs import (
    decode_change,
    desanitize,
    encode_change,
    sanitize,
    user_path,
    with_credential,
)
from tributary.protocol.sasl.scram import SCRAM_SHA_512, credential_from_password
from tributary.protocol.secrets import Secret, SecretError, resolve_secret
from tributary.testing.tls import CertificateAuthority, Issued

BASE = {"id": 1, "data-dir": "/tmp/d", "zookeeper": "127.0.0.1:2181/east"}


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Issued]:
    yield CertificateAuthority.create(tmp_path_factory.mktemp("ca")).issue("broker")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return path


def test_listen_and_advertise_still_make_one_plaintext_listener() -> None:
    config = load({**BASE, "listen": "127.0.0.1:9092", "advertise": "east-1:9092"})
    (listener,) = config.security.listeners
    assert listener.bind == Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)
    assert listener.advertised == Endpoint("PLAINTEXT", "PLAINTEXT", "east-1", 9092)
    assert config.security.inter_broker.listener == "PLAINTEXT" and config.security.inter_broker.username is None
    assert (config.listen, config.advertise) == (HostPort("127.0.0.1", 9092), HostPort("east-1", 9092))


def test_named_listeners_with_tls_and_sasl(tmp_path: Path, certificate: Issued) -> None:
    password = tmp_path / "broker.pw"
    password.write_text("broker-secret\n")
    toml = write(
        tmp_path,
        f"""
listeners = "INTERNAL://10.0.0.7:9092,EXTERNAL://0.0.0.0:9094,SASL_SSL://127.0.0.1:9095"
advertised.listeners = "EXTERNAL://east-1.example.com:9094"
listener.security.protocol.map = "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SSL"
inter.broker.listener.name = "internal"
"ssl.keystore.location" = "{certificate.keystore}"
"listener.name.external.ssl.client.auth" = "requested"
"listener.name.external.ssl.truststore.location" = "{certificate.certificate}"
"listener.name.internal.sasl.enabled.mechanisms" = "SCRAM-SHA-512,PLAIN"
"sasl.inter.broker.username" = "broker"
"sasl.inter.broker.password" = "${{file:{password}}}"
""",
    )
    config = load(BASE, toml)
    internal, external, sasl_ssl = config.security.listeners
    assert internal.bind == Endpoint("INTERNAL", "SASL_PLAINTEXT", "10.0.0.7", 9092)
    assert internal.advertised == internal.bind and internal.sasl_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert external.advertised == Endpoint("EXTERNAL", "SSL", "east-1.example.com", 9094)
    assert external.tls is not None and external.tls.client_auth == "requested"
    # A listener named after its protocol needs no map entry; defaults where nothing is set.
    assert sasl_ssl.bind.protocol == "SASL_SSL" and sasl_ssl.sasl_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert sasl_ssl.tls is not None and sasl_ssl.tls.client_auth == "none"
    inter = config.security.inter_broker
    assert (inter.listener, inter.protocol, inter.mechanism, inter.username) == (
        "INTERNAL", "SASL_PLAINTEXT", "SCRAM-SHA-512", "broker"
    )  # fmt: skip
    assert inter.password is not None and inter.password.reveal() == "broker-secret"
    assert "broker-secret" not in repr(config)
    assert config.listen == HostPort("10.0.0.7", 9092)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('listeners = "PLAINTEXT://127.0.0.1:9092"\nlisten = "127.0.0.1:9093"', "either 'listeners'"),
        ('listeners = "CLIENT://127.0.0.1:9092"', "listener CLIENT has no security protocol"),
        ('listeners = "A://127.0.0.1:9092,A://127.0.0.1:9093"\nlistener.security.protocol.map = "A:SSL"', "twice"),
        ('listeners = "PLAINTEXT://127.0.0.1"', "is not NAME://HOST:PORT"),
        ('listeners = "PLAINTEXT://0.0.0.0:9092"', "give it a host clients can reach"),
        (
            'listeners = "PLAINTEXT://127.0.0.1:9092"\nadvertised.listeners = "OTHER://h:1"\n'
            'listener.security.protocol.map = "OTHER:SSL"',
            "OTHER is not one of the listeners",
        ),
        (
            'listeners = "A://127.0.0.1:1,B://127.0.0.1:2"\nlistener.security.protocol.map = "A:PLAINTEXT,B:PLAINTEXT"',
            "'inter.broker.listener.name' is missing",
        ),
        ('listeners = "PLAINTEXT://127.0.0.1:1"\ninter.broker.listener.name = "NOPE"', "NOPE is not one of"),
        ('listeners = "SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"', "set 'ssl.keystore.location'"),
        ('listeners = "SASL_PLAINTEXT://127.0.0.1:1"', "'sasl.inter.broker.username'"),
        (
            'listeners = "SASL_PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"\n"sasl.enabled.mechanisms" = "GSSAPI"',
            "GSSAPI is not among",
        ),
        (
            'listeners = "SASL_PLAINTEXT://127.0.0.1:1"\n"sasl.enabled.mechanisms" = "PLAIN"\n'
            '"sasl.inter.broker.username" = "b"\n"sasl.inter.broker.password" = "x"',
            "SCRAM-SHA-512 is not enabled on listener SASL_PLAINTEXT",
        ),
        (
            'listeners = "SASL_PLAINTEXT://127.0.0.1:1"\n"sasl.inter.broker.username" = "b"\n'
            '"sasl.inter.broker.password" = "${env:TRIBUTARY_TEST_NO_SUCH_VARIABLE}"',
            "environment variable TRIBUTARY_TEST_NO_SUCH_VARIABLE is not set",
        ),
        ('listeners = "PLAINTEXT://127.0.0.1:1"\n"listener.name.other.ssl.client.auth" = "none"', "'other'"),
        ('listeners = "PLAINTEXT://127.0.0.1:1"\n"listener.name.plaintext.log.retention.ms" = 1', "unknown setting"),
        ('listeners = "PLAINTEXT://127.0.0.1:1"\n"connection.failed.authentication.delay.ms" = -5', ">= 0"),
    ],
)
def test_mistakes_name_the_setting(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(BASE, write(tmp_path, text))


def test_secrets_come_from_files_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUTARY_TEST_SECRET", "from-env")
    (tmp_path / "pw").write_text("from-file\r\n")
    assert resolve_secret("x", "${env:TRIBUTARY_TEST_SECRET}").reveal() == "from-env"
    file_secret = resolve_secret("x", f"${{file:{tmp_path / 'pw'}}}")
    assert file_secret.reveal() == "from-file"
    assert str(file_secret) == repr(file_secret) == f"Secret(<hidden>, from file {tmp_path / 'pw'})"
    assert resolve_secret("x", "literal") == Secret("literal")
    for bad, message in (("", "non-empty"), ("${file:/nonexistent/pw}", "cannot read"), (5, "non-empty")):
        with pytest.raises(SecretError, match=message):
            resolve_secret("sasl.password", bad)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SecretError, match="is empty"):
        resolve_secret("sasl.password", f"${{file:{tmp_path / 'empty'}}}")
    assert os.environ["TRIBUTARY_TEST_SECRET"] not in repr(resolve_secret("x", "${env:TRIBUTARY_TEST_SECRET}"))


@pytest.mark.parametrize(
    ("name", "node"),
    [
        ("alice", "alice"),
        ("a b", "a%20b"),
        ("x*y", "x%2Ay"),
        ("us/er", "us%2Fer"),
        ("é~", "%C3%A9%7E"),
        ("a.b-c_d", "a.b-c_d"),
    ],
)
def test_user_names_are_sanitized_as_kafka_does(name: str, node: str) -> None:
    assert sanitize(name) == node and desanitize(node) == name
    assert user_path(name) == f"/config/users/{node}"


def test_user_config_nodes_and_change_notifications_in_kafkas_format() -> None:
    credential = credential_from_password(SCRAM_SHA_512, "pw", salt=b"s" * 16, iterations=4096)
    # Another key of the user's config (a quota) is kept when a credential is set or removed.
    node = with_credential(b'{"version":1,"config":{"producer_byte_rate":"1024"}}', "SCRAM-SHA-512", credential)
    assert node is not None and b'"producer_byte_rate":"1024"' in node and b"SCRAM-SHA-512" in node
    assert with_credential(node, "SCRAM-SHA-512", None) == b'{"config":{"producer_byte_rate":"1024"},"version":1}'
    assert with_credential(None, "SCRAM-SHA-512", None) is None
    assert encode_change("a b") == b'{"version":2,"entity_path":"users/a%20b"}'
    assert decode_change(b'{"version":2,"entity_path":"users/a%20b"}') == ("users", "a b")
    assert decode_change(b'{"version":1,"entity_type":"users","entity_name":"bob"}') == ("users", "bob")
    assert decode_change(b'{"version":2,"entity_path":"users/bob/clients/c1"}') is None  # a quota
    assert decode_change(b'{"version":2,"entity_path":"topics/clicks"}') == ("topics", "clicks")
    assert decode_change(b"not json") is None
