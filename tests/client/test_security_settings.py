"""The client's security settings: Kafka's names (librdkafka's and Java's), --command-config files
in properties or TOML form, secrets that never print, and a config that pickles for Spark."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tributary.client.security.settings import (
    PLAINTEXT,
    SecurityConfig,
    SecuritySettingsError,
    load_command_config,
    read_properties,
    security_from_settings,
)
from tributary.testing.tls import CertificateAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


def test_librdkafka_names(ca: CertificateAuthority, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("s3cret\n")
    client = ca.issue("alice", key_password="k3y")
    security = security_from_settings(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": f"${{file:{tmp_path / 'pw'}}}",
            "ssl.ca.location": str(ca.path),
            "ssl.certificate.location": str(client.certificate),
            "ssl.key.location": str(client.key),
            "ssl.key.password": "k3y",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert (security.protocol, security.sasl_mechanism, security.sasl_username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
    )
    assert security.sasl_password is not None and security.sasl_password.reveal() == "s3cret"
    assert security.tls and security.sasl and not security.ssl_check_hostname
    assert security.ssl_context() is security.ssl_context()  # made once
    assert "s3cret" not in repr(security) and "k3y" not in repr(security)


def test_an_existing_kafka_tool_properties_file_works(ca: CertificateAuthority, tmp_path: Path) -> None:
    """Java's spellings, as in a client.properties for kafka-topics.sh --command-config."""
    pem = ca.issue("tool")
    path = tmp_path / "client.properties"
    path.write_text(
        "# for kafka-topics.sh\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="pa\\"ss";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca.path}\n"
        f"ssl.keystore.location = {pem.keystore}\n"
    )
    security = load_command_config(path)
    assert (security.sasl_mechanism, security.sasl_username) == ("SCRAM-SHA-256", "admin")
    assert security.sasl_password is not None and security.sasl_password.reveal() == 'pa"ss'
    assert security.ssl_ca_location == ca.path
    assert security.ssl_certificate_location == security.ssl_key_location == pem.keystore
    security.ssl_context()


def test_a_toml_command_config_with_relative_paths(ca: CertificateAuthority, tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.path.read_bytes())
    path = tmp_path / "client.toml"
    path.write_text('security.protocol = "SSL"\nssl.ca.location = "ca.pem"\n')
    assert load_command_config(path).ssl_ca_location == tmp_path / "ca.pem"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"security.protocol": "TLS"}, "security.protocol must be one of"),
        ({"security.protocol": "SASL_SSL"}, "needs sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "not 'GSSAPI'"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs sasl.username and sasl.password"),
        ({"ssl.ca.location": "/nonexistent/ca.pem"}, "is not a readable file"),
        ({"ssl.truststore.type": "JKS"}, "only PEM"),
        ({"bootstrap.servers": "x:1"}, "unknown security setting 'bootstrap.servers'"),
        ({"ssl.endpoint.identification.algorithm": "maybe"}, "https"),
        ({"sasl.jaas.config": "username=x"}, "names no login module"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "${env:TRIBUTARY_TEST_NO_SUCH_VARIABLE}",
            },
            "is not set",
        ),
    ],
)
def test_mistakes_are_one_line_naming_the_setting(settings: dict[str, str], message: str) -> None:
    with pytest.raises(SecuritySettingsError, match=message):
        security_from_settings(settings)


def test_an_encrypted_key_without_its_password_is_named(ca: CertificateAuthority) -> None:
    client = ca.issue("locked", key_password="right")
    security = security_from_settings(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(client.certificate),
            "ssl.key.location": str(client.key),
        }
    )
    with pytest.raises(SecuritySettingsError, match=r"encrypted and ssl\.key\.password is not set"):
        security.ssl_context()


def test_the_config_pickles_without_its_context_and_with_its_secret(ca: CertificateAuthority) -> None:
    security = security_from_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "loader",
            "sasl.password": "pw",
            "ssl.ca.location": str(ca.path),
        }
    )
    security.ssl_context()
    copy = pickle.loads(pickle.dumps(security))
    assert copy == security and copy.sasl_password is not None and copy.sasl_password.reveal() == "pw"
    assert copy.ssl_context() is not security.ssl_context()
    assert pickle.loads(pickle.dumps(PLAINTEXT)) == SecurityConfig()


def test_properties_syntax() -> None:
    text = "a=1\nb : 2\n! comment\n  c   3\nd=x\\\n  y\ne=\n"
    assert read_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": ""}
