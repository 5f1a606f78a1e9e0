"""SCRAM and PLAIN: the RFC 7677 vector, kafka-python's SCRAM client against our server, our
client against our server for any user and password, and every way an exchange can fail."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

from tributary.broker.security.mechanisms import (
    AuthenticationFailed,
    PlainServer,
    ScramServer,
    invalid_credentials,
)
from tributary.protocol.sasl import scram
from tributary.protocol.sasl.plain import encode_plain, parse_plain
from tributary.protocol.sasl.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramError,
    credential_from_password,
    format_credential,
    parse_credential,
)

# RFC 7677, section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _lookup(store: dict[str, dict[str, ScramCredential]]):  # type: ignore[no-untyped-def]
    return lambda user, mechanism: store.get(user, {}).get(mechanism)


def test_our_client_follows_the_rfc_7677_exchange() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert client.done


def test_our_server_follows_the_rfc_7677_exchange() -> None:
    credential = credential_from_password(SCRAM_SHA_256, "pencil", salt=RFC_SALT, iterations=4096)
    store = {"user": {"SCRAM-SHA-256": credential}}
    server = ScramServer(SCRAM_SHA_256, _lookup(store), server_nonce=lambda: RFC_SERVER_NONCE)
    assert server.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_kafka_pythons_scram_client_authenticates_against_our_server(mechanism: scram.ScramMechanism) -> None:
    """An independent client (kafka-python's) against our server, both ways checked: our server
    accepts its proof, and it accepts our server's signature."""
    store = {"alice": {mechanism.name: credential_from_password(mechanism, "alice-secret")}}
    server = ScramServer(mechanism, _lookup(store))
    client = KafkaPythonScramClient("alice", "alice-secret", mechanism.name)
    server_first = server.step(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.step(client.final_message())
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert server.complete and server.username == "alice"


def test_kafka_pythons_client_with_a_wrong_password_is_refused() -> None:
    store = {"alice": {"SCRAM-SHA-512": credential_from_password(SCRAM_SHA_512, "alice-secret")}}
    server = ScramServer(SCRAM_SHA_512, _lookup(store))
    client = KafkaPythonScramClient("alice", "guess", "SCRAM-SHA-512")
    client.process_server_first_message(server.step(client.first_message()))
    with pytest.raises(AuthenticationFailed) as failure:
        server.step(client.final_message())
    assert failure.value.client_message == invalid_credentials("SCRAM-SHA-512")
    assert "wrong password" in failure.value.reason


names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=20)


@settings(max_examples=25, deadline=None)
@given(user=names, password=names, wrong=names, mechanism=st.sampled_from([SCRAM_SHA_256, SCRAM_SHA_512]))
def test_any_user_and_password_authenticate_and_only_that_password(
    user: str, password: str, wrong: str, mechanism: scram.ScramMechanism
) -> None:
    """Commas, equals signs and any Unicode in names and passwords (saslname escaping)."""
    store = {user: {mechanism.name: credential_from_password(mechanism, password)}}
    server = ScramServer(mechanism, _lookup(store))
    client = ScramClient(mechanism, user, password)
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.username == user
    if wrong != password:
        server = ScramServer(mechanism, _lookup(store))
        client = ScramClient(mechanism, user, wrong)
        with pytest.raises(AuthenticationFailed):
            server.step(client.final(server.step(client.first())))


def _exchange_to_final(store: dict[str, dict[str, ScramCredential]], user: str, password: str) -> tuple:  # type: ignore[type-arg]
    server = ScramServer(SCRAM_SHA_512, _lookup(store))
    client = ScramClient(SCRAM_SHA_512, user, password)
    server_first = server.step(client.first())
    return server, client, server_first, client.final(server_first)


STORE = {"alice": {"SCRAM-SHA-512": credential_from_password(SCRAM_SHA_512, "alice-secret")}}


def test_an_unknown_user_gets_a_stable_made_up_salt_and_the_same_refusal_as_a_wrong_password() -> None:
    _, _, first_a, _ = _exchange_to_final(STORE, "mallory", "x")
    _, _, first_b, _ = _exchange_to_final(STORE, "mallory", "y")
    salt = lambda m: dict(p.split("=", 1) for p in m.decode().split(","))["s"]  # noqa: E731
    assert salt(first_a) == salt(first_b) != salt(_exchange_to_final(STORE, "trudy", "x")[2])
    server, _, _, final = _exchange_to_final(STORE, "mallory", "x")
    with pytest.raises(AuthenticationFailed) as unknown:
        server.step(final)
    server, _, _, final = _exchange_to_final(STORE, "alice", "wrong")
    with pytest.raises(AuthenticationFailed) as wrong:
        server.step(final)
    assert unknown.value.client_message == wrong.value.client_message == invalid_credentials("SCRAM-SHA-512")
    assert "unknown user 'mallory'" in unknown.value.reason


def test_a_tampered_nonce_or_proof_is_refused() -> None:
    server, _, _, final = _exchange_to_final(STORE, "alice", "alice-secret")
    tampered_nonce = final.replace(b",r=", b",r=X", 1)
    with pytest.raises(AuthenticationFailed) as failure:
        server.step(tampered_nonce)
    assert failure.value.kind == "malformed" and "nonce" in failure.value.reason
    server, _, _, final = _exchange_to_final(STORE, "alice", "alice-secret")
    head, _, proof = final.rpartition(b",p=")
    flipped = bytearray(base64.b64decode(proof))
    flipped[0] ^= 1
    with pytest.raises(AuthenticationFailed) as failure:
        server.step(head + b",p=" + base64.b64encode(bytes(flipped)))
    assert failure.value.kind == "bad_credentials"
    # A proof of the wrong length is refused too, not an exception.
    server, _, _, final = _exchange_to_final(STORE, "alice", "alice-secret")
    with pytest.raises(AuthenticationFailed):
        server.step(head + b",p=" + base64.b64encode(b"short"))


@pytest.mark.parametrize(
    "first",
    [
        b"",
        b"\xff\xfe",
        b"p=tls-unique,,n=alice,r=abc",  # channel binding
        b"n,,m=ext,n=alice,r=abc",  # mandatory extension
        b"n,,n=alice",  # no nonce
        b"n,,n=al=ice,r=abc",  # a bare "=" in the name
        b"n,a=bob,n=alice,r=abc",  # authorization id of someone else
        b"n,,n=alice,r=abc,tokenauth=true",  # delegation tokens
    ],
)
def test_malformed_client_first_messages_are_refused_cleanly(first: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        ScramServer(SCRAM_SHA_512, _lookup(STORE)).step(first)


def test_a_token_after_completion_is_refused() -> None:
    server, client, _, final = _exchange_to_final(STORE, "alice", "alice-secret")
    client.verify(server.step(final))
    with pytest.raises(AuthenticationFailed) as failure:
        server.step(final)
    assert failure.value.kind == "illegal_state"


def test_our_client_refuses_a_server_that_does_not_know_the_credential() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    with pytest.raises(ScramError, match="nonce"):
        client.final(b"r=somethingelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(ScramError, match="iterations"):
        client.final(b"r=rOprNGfwEbeRWgbNEkqOmore,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1")
    with pytest.raises(ScramError, match="refused"):
        client.final(b"e=unknown-user")


def test_credentials_in_kafkas_text_form_round_trip() -> None:
    credential = credential_from_password(SCRAM_SHA_512, "secret", salt=b"0123456789abcdef", iterations=8192)
    text = format_credential(credential)
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=8192")
    assert parse_credential(text) == credential
    for bad in (
        "salt=x",
        "salt=!!,stored_key=a,server_key=a,iterations=1",
        "salt=,stored_key=,server_key=,iterations=x",
    ):
        with pytest.raises(ScramError):
            parse_credential(bad)


def test_plain_checks_the_password_against_the_scram_credential() -> None:
    store = {
        "alice": {"SCRAM-SHA-512": credential_from_password(SCRAM_SHA_512, "alice-secret")},
        "bob": {"SCRAM-SHA-256": credential_from_password(SCRAM_SHA_256, "bob-secret")},
    }
    for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
        server = PlainServer(_lookup(store))
        assert server.step(encode_plain(user, password)) == b""
        assert server.complete and server.username == user
    for token, reason in (
        (encode_plain("alice", "guess"), "wrong password"),
        (encode_plain("mallory", "x"), "unknown user"),
        (b"\0alice", "malformed"),
        (b"bob\0alice\0alice-secret", "authorization id"),
        (b"\0\0x", "username not specified"),
    ):
        with pytest.raises(AuthenticationFailed) as failure:
            PlainServer(_lookup(store)).step(token)
        assert reason in failure.value.reason or reason in failure.value.client_message


def test_plain_credentials_never_show_the_password() -> None:
    assert "alice-secret" not in repr(parse_plain(encode_plain("alice", "alice-secret")))


def test_librdkafkas_doubled_client_nonce_is_accepted_and_nothing_else() -> None:
    """librdkafka < 2.6.1 (kcat 1.7.1's 2.0.2) sends r=<client nonce><agreed nonce>; Kafka 3.8.1
    accepts it too. The proof is computed over that message, so the exchange stays bound."""
    credential = STORE["alice"]["SCRAM-SHA-512"]
    for prefix, accepted in (("client", True), ("other", False)):
        server = ScramServer(SCRAM_SHA_512, _lookup(STORE))
        client_nonce = "rOprNGfwEbeRWgbNEkqO"
        first = server.step(f"n,,n=alice,r={client_nonce}".encode())
        agreed = dict(p.split("=", 1) for p in first.decode().split(","))["r"]
        nonce = (client_nonce if prefix == "client" else "X" * len(client_nonce)) + agreed
        without_proof = f"c=biws,r={nonce}"
        message = scram.auth_message(f"n=alice,r={client_nonce}", first.decode(), without_proof)
        salted = SCRAM_SHA_512.salted_password(b"alice-secret", credential.salt, credential.iterations)
        proof = scram.client_proof(SCRAM_SHA_512, salted, message)
        final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if accepted:
            assert server.step(final).startswith(b"v=")
        else:
            with pytest.raises(AuthenticationFailed, match="tampered"):
                server.step(final)
