"""A broker logging in to another broker's SASL listener (replica fetchers), sans-IO driven.

SaslHandshake v1 naming ``sasl.mechanism.inter.broker.protocol``, then SaslAuthenticate v1 with
the mechanism's tokens (the client sides in :mod:`protocol.sasl`). Any refusal, and a SCRAM
server whose signature does not prove it knows the credential, raises :class:`SaslLoginError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from tributary.protocol.sasl import scram
from tributary.protocol.sasl.plain import MECHANISM as PLAIN
from tributary.protocol.sasl.plain import encode_plain
from tributary.protocol.schema import Declared
from tributary.protocol.secrets import Secret

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1

#: request(body, version) -> decoded response body.
Requester = Callable[[Declared, int], Awaitable[Any]]


class SaslLoginError(Exception):
    """The other broker refused this broker's login; the message says why."""


async def _token(request: Requester, token: bytes) -> bytes:
    response = await request(SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION)
    if response.error_code != ErrorCode.NONE:
        raise SaslLoginError(f"{ErrorCode(response.error_code).name}: {response.error_message}")
    return bytes(response.auth_bytes)


async def login(request: Requester, mechanism: str, username: str, password: Secret) -> None:
    response = await request(SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_VERSION)
    if response.error_code != ErrorCode.NONE:
        enabled = ", ".join(response.mechanisms)
        raise SaslLoginError(f"SaslHandshake {mechanism}: {ErrorCode(response.error_code).name} (enabled: {enabled})")
    if mechanism == PLAIN:
        await _token(request, encode_plain(username, password.reveal()))
        return
    client = scram.ScramClient(scram.MECHANISMS[mechanism], username, password.reveal())
    try:
        server_first = await _token(request, client.first())
        server_final = await _token(request, client.final(server_first))
        client.verify(server_final)
    except scram.ScramError as exc:
        raise SaslLoginError(f"{mechanism}: {exc}") from None


__all__ = ["SaslLoginError", "login"]
