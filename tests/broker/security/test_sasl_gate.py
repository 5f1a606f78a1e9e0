"""A SASL listener's connection loop over in-memory streams, with the real SASL handlers: only
ApiVersions, SaslHandshake and SaslAuthenticate before the exchange completes; the principal on
every request after it; failures answered, delayed, counted and closed; v0 raw tokens."""

from __future__ import annotations

import dataclasses
import logging
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.broker.memory_connection import closed, fake_broker
from tributary.broker import connection
from tributary.broker.connection_limits import RateLimitedLog
from tributary.broker.context import RequestContext
from tributary.broker.dispatch import advertised_versions
from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal
from tributary.broker.security.sasl import PRE_AUTHENTICATION_APIS, IllegalSaslState, Phase, SaslSession
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.framing import FrameDecoder, frame
from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.messages import (
    ApiKey,
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tributary.protocol.sasl.plain import encode_plain
from tributary.protocol.sasl.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramError,
    credential_from_password,
)
from tributary.protocol.schema import Declared

USERS = {
    "alice": {
        "SCRAM-SHA-512": credential_from_password(SCRAM_SHA_512, "alice-secret"),
        "SCRAM-SHA-256": credential_from_password(SCRAM_SHA_256, "alice-secret"),
    }
}
DELAY_MS = 300


def lookup(user: str, mechanism: str) -> Any:
    return USERS.get(user, {}).get(mechanism)


def broker() -> Any:
    """A stand-in broker with what the connection and the SASL handlers touch."""
    stand_in = fake_broker()
    security = dataclasses.replace(stand_in.config.security, failed_authentication_delay_ms=DELAY_MS)
    return SimpleNamespace(
        config=dataclasses.replace(stand_in.config, security=security),
        metrics=stand_in.metrics,
        request_budget=stand_in.request_budget,
        api_versions=advertised_versions(),
        auth_log=RateLimitedLog(logging.getLogger("test.sasl"), 10.0, trio.current_time),
    )


class Client:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()
        self.correlation_id = 0

    async def frame(self) -> bytes:
        while (data := self.decoder.next_frame()) is None:
            chunk = await self.stream.receive_some()
            if not chunk:
                raise EOFError("the broker closed the connection")
            self.decoder.feed(chunk)
        return data

    async def request(self, body: Declared, version: int) -> Any:
        self.correlation_id += 1
        await self.stream.send_all(encode_request(body, version, self.correlation_id, "test"))
        api_key = type(body).SPEC.api_key
        assert api_key is not None
        _, response = decode_response(api_key, version, await self.frame())
        return response

    async def raw(self, token: bytes) -> bytes:
        await self.stream.send_all(frame(token))
        return await self.frame()

    async def scram(self, password: str, mechanism: Any = SCRAM_SHA_512, version: int = 1) -> Any:
        handshake = await self.request(SaslHandshakeRequest(mechanism=mechanism.name), 1)
        assert handshake.error_code == 0
        client = ScramClient(mechanism, "alice", password)
        first = await self.request(SaslAuthenticateRequest(auth_bytes=client.first()), version)
        assert first.error_code == 0, first
        final = await self.request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), version)
        if final.error_code == 0:
            client.verify(final.auth_bytes)
        return final


@asynccontextmanager
async def sasl_connection(stand_in: Any) -> AsyncIterator[Client]:
    """A client on a SASL_PLAINTEXT connection of ``stand_in`` (listener SECURE)."""
    auth = ConnectionAuthentication("SECURE", "SASL_PLAINTEXT")
    auth.sasl = SaslSession(("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"), lookup)
    client_end, server_end = trio.testing.memory_stream_pair()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.serve_connection, stand_in, server_end, "peer", auth)
            yield Client(client_end)
            await client_end.aclose()


@pytest.fixture
def principals(monkeypatch: pytest.MonkeyPatch) -> list[KafkaPrincipal]:
    """The principal of each request as the dispatcher receives it (the dispatcher still answers)."""
    seen: list[KafkaPrincipal] = []
    respond = connection.respond

    async def recording(ctx: RequestContext, body: bytes) -> Any:
        seen.append(ctx.principal)
        assert ctx.listener == "SECURE"
        return await respond(ctx, body)

    monkeypatch.setattr(connection, "respond", recording)
    return seen


async def test_only_the_sasl_apis_are_served_before_authentication(principals: list[KafkaPrincipal]) -> None:
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        versions = await client.request(ApiVersionsRequest(), 3)
        assert versions.error_code == 0
        await client.stream.send_all(encode_request(MetadataRequest(topics=[]), 1, 9, "test"))
        await closed(client.stream, within=5)
    assert principals == [ANONYMOUS]
    assert stand_in.metrics.authentication_failures == {("SECURE", "illegal_state"): 1}


@pytest.mark.parametrize(("mechanism", "version"), [(SCRAM_SHA_512, 1), (SCRAM_SHA_256, 2), (SCRAM_SHA_512, 0)])
async def test_scram_sets_the_principal_of_every_later_request(
    principals: list[KafkaPrincipal], mechanism: Any, version: int
) -> None:
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        final = await client.scram("alice-secret", mechanism, version)
        assert final.error_code == 0 and final.session_lifetime_ms == 0
        for _ in range(2):
            assert (await client.request(ApiVersionsRequest(), 3)).error_code == 0
    alice = KafkaPrincipal("User", "alice")
    assert principals == [ANONYMOUS, ANONYMOUS, ANONYMOUS, alice, alice]
    assert stand_in.metrics.authentications == {("SECURE", mechanism.name): 1}


async def test_plain_logs_in_with_the_scram_credential(principals: list[KafkaPrincipal]) -> None:
    async with sasl_connection(broker()) as client:
        assert (await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)).mechanisms
        answer = await client.request(SaslAuthenticateRequest(auth_bytes=encode_plain("alice", "alice-secret")), 1)
        assert answer.error_code == 0
        await client.request(ApiVersionsRequest(), 3)
    assert principals[-1] == KafkaPrincipal("User", "alice")


async def test_a_wrong_password_is_answered_after_the_delay_then_closed() -> None:
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        started = trio.current_time()
        final = await client.scram("guess")
        waited = trio.current_time() - started
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert final.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
        )
        assert waited >= DELAY_MS / 1000
        await closed(client.stream, within=5)
    assert stand_in.metrics.authentication_failures == {("SECURE", "bad_credentials"): 1}


async def test_an_unknown_mechanism_gets_the_enabled_list_then_the_connection_closes() -> None:
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        answer = await client.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
        await closed(client.stream, within=5)
    assert stand_in.metrics.authentication_failures == {("SECURE", "unsupported_mechanism"): 1}


async def test_v0_handshakes_exchange_raw_tokens() -> None:
    async with sasl_connection(broker()) as client:
        assert (await client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0)).error_code == 0
        scram = ScramClient(SCRAM_SHA_512, "alice", "alice-secret")
        server_first = await client.raw(scram.first())
        scram.verify(await client.raw(scram.final(server_first)))
        assert (await client.request(ApiVersionsRequest(), 3)).error_code == 0
    # A wrong password on the raw path: no answer (Kafka's v0 behaviour), the connection closes.
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        await client.stream.send_all(frame(encode_plain("alice", "guess")))
        await closed(client.stream, within=5)
    assert stand_in.metrics.authentication_failures == {("SECURE", "bad_credentials"): 1}


async def test_a_second_handshake_after_authentication_closes_the_connection() -> None:
    async with sasl_connection(broker()) as client:
        assert (await client.scram("alice-secret")).error_code == 0
        await client.stream.send_all(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 50, "test"))
        await closed(client.stream, within=5)


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">i", 600 * 1024) + b"\0" * 16,  # a frame larger than sasl.server.max.receive.size
        b"\xff" * 64,  # garbage: a negative length
        frame(b"\x00\x12"),  # a header cut short
    ],
)
async def test_bad_frames_before_authentication_close_the_connection(payload: bytes) -> None:
    stand_in = broker()
    async with sasl_connection(stand_in) as client:
        await client.stream.send_all(payload)
        await closed(client.stream, within=5)


# --- the state machine alone, any sequence of events ------------------------------------------------

events = st.lists(
    st.one_of(
        st.tuples(st.just("handshake"), st.sampled_from(["SCRAM-SHA-512", "PLAIN", "GSSAPI", ""]), st.integers(0, 1)),
        st.tuples(st.just("token"), st.sampled_from(["good", "bad", "garbage"]), st.just(0)),
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(events=events)
def test_any_sequence_of_events_keeps_kafkas_rules(events: list[tuple[str, str, int]]) -> None:
    """Whatever a client sends, in any order: nothing but ApiVersions, SaslHandshake and
    SaslAuthenticate is admitted before the exchange completes; a failed exchange admits
    nothing; a principal exists exactly when it completed; nothing raises but IllegalSaslState."""
    session = SaslSession(("SCRAM-SHA-512", "PLAIN"), lookup)
    client: ScramClient | None = None
    for kind, value, version in events:
        try:
            if kind == "handshake":
                if session.handshake(value, version) and value == "SCRAM-SHA-512":
                    client = ScramClient(SCRAM_SHA_512, "alice", "alice-secret")
            else:
                token = {"garbage": b"\xff\x00garbage", "bad": encode_plain("alice", "nope")}.get(value, b"")
                if value == "good" and client is not None:
                    token = client.first() if session.phase is Phase.AUTHENTICATE and not client.done else b""
                step = session.authenticate(token)
                if value == "good" and client is not None and not step.failed and not session.complete:
                    session.authenticate(client.final(step.token))
        except IllegalSaslState:
            pass
        except ScramError:
            pass
        if session.phase is Phase.FAILED:
            assert not any(session.admits(k) for k in ApiKey)
        elif not session.complete:
            assert {k for k in ApiKey if session.admits(k)} <= PRE_AUTHENTICATION_APIS
        assert (session.principal is not None) == session.complete
