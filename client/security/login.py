"""The client's SASL login, sans-IO: a generator of requests that is sent their responses.

::

    login = sasl_login(security, versions)
    request, version = next(login)          # SaslHandshake
    while True:
        response = <send request at version, wait for the answer>
        try:
            request, version = login.send(response)
        except StopIteration:
            break                           # authenticated

SaslHandshake (v1 when the broker offers it), then SaslAuthenticate with the mechanism's tokens
(SCRAM: client-first, client-final, and the server's signature checked; PLAIN: one message).
Any refusal raises the client error for the broker's code with its message; a SCRAM server
that cannot prove it knows the credential raises SaslAuthenticationFailedError.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from tributary.client.errors import SaslAuthenticationFailedError, error_for
from tributary.client.security.settings import SecurityConfig
from tributary.client.wire.versions import BrokerApiVersions
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest
from tributary.protocol.sasl import scram
from tributary.protocol.sasl.plain import MECHANISM as PLAIN
from tributary.protocol.sasl.plain import encode_plain
from tributary.protocol.schema import Declared

Login = Generator[tuple[Declared, int], Any, None]


def sasl_login(security: SecurityConfig, versions: BrokerApiVersions, broker: int | str) -> Login:
    mechanism = security.sasl_mechanism
    username = security.sasl_username
    assert mechanism is not None and username is not None and security.sasl_password is not None
    handshake_version = versions.pick(ApiKey.SASL_HANDSHAKE)
    if handshake_version < 1:
        raise error_for(
            ErrorCode.UNSUPPORTED_VERSION,
            broker=broker,
            context="SaslHandshake",
            detail="the broker offers only v0 (raw SASL tokens), which this client does not speak",
        )
    response = yield SaslHandshakeRequest(mechanism=mechanism), handshake_version
    if response.error_code:
        enabled = ", ".join(response.mechanisms) or "none"
        raise error_for(
            response.error_code, broker=broker, context=f"SaslHandshake {mechanism}", detail=f"enabled: {enabled}"
        )
    authenticate_version = versions.pick(ApiKey.SASL_AUTHENTICATE)

    def token(data: bytes) -> Generator[tuple[Declared, int], Any, bytes]:
        answer = yield SaslAuthenticateRequest(auth_bytes=data), authenticate_version
        if answer.error_code:
            raise error_for(
                answer.error_code,
                broker=broker,
                context=f"SASL {mechanism} login of user {username!r}",
                detail=answer.error_message,
            )
        return bytes(answer.auth_bytes)

    password = security.sasl_password.reveal()
    if mechanism == PLAIN:
        yield from token(encode_plain(username, password))
        return
    client = scram.ScramClient(scram.MECHANISMS[mechanism], username, password)
    try:
        server_first = yield from token(client.first())
        server_final = yield from token(client.final(server_first))
        client.verify(server_final)
    except scram.ScramError as exc:
        raise SaslAuthenticationFailedError(
            f"SASL {mechanism} login of user {username!r} to broker {broker}: {exc}", broker=broker
        ) from None


__all__ = ["Login", "sasl_login"]
