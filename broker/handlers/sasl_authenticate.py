"""SaslAuthenticate: one token of the SASL exchange, and the raw tokens after a v0 handshake.

A completed exchange gives the connection its principal, ``User:<name>``. A failed one is
answered SASL_AUTHENTICATION_FAILED with Kafka's message after
``connection.failed.authentication.delay.ms``, counted, logged (at most a line per listener and
reason every few seconds), and the connection closes; nothing else on the broker changes.
Re-authentication is not offered: ``session_lifetime_ms`` is 0.

The mechanism's work runs in a worker thread: PLAIN derives a key from the password (PBKDF2,
thousands of iterations), which must not hold up every other connection's requests.
"""

from __future__ import annotations

import logging
from functools import partial

import trio

from tributary.broker.context import RequestContext
from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.mechanisms import AuthenticationFailed
from tributary.broker.security.sasl import SaslSession
from tributary.broker.state import Broker
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

log = logging.getLogger(__name__)


async def authenticate_token(
    broker: Broker, auth: ConnectionAuthentication, sasl: SaslSession, token: bytes, peer: str
) -> bytes | AuthenticationFailed:
    """Run one token through the exchange: the answer, or the failure (already counted, logged,
    delayed, and marked on the connection, which closes once the answer is sent)."""
    step = await trio.to_thread.run_sync(partial(sasl.authenticate, token))
    if step.failure is not None:
        failure = step.failure
        broker.metrics.authentication_failed(auth.listener, failure.kind)
        mechanism = sasl.mechanism.name if sasl.mechanism is not None else "?"
        broker.auth_log.note(
            f"{auth.listener}/{failure.kind}",
            f"authentication failed on listener {auth.listener} from {peer} ({mechanism}): {failure.reason}",
        )
        await trio.sleep(broker.config.security.failed_authentication_delay_ms / 1000)
        auth.close_reason = f"authentication failed: {failure.reason}"
        return failure
    if sasl.complete and sasl.principal is not None and sasl.mechanism is not None:
        auth.principal = sasl.principal
        broker.metrics.authenticated(auth.listener, sasl.mechanism.name)
        log.debug(
            "%s authenticated as %s on listener %s (%s)", peer, auth.principal, auth.listener, sasl.mechanism.name
        )
    return step.token


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    auth = ctx.authentication
    if auth is None or auth.sasl is None or auth.sasl.complete:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate is only expected during a SASL exchange on a SASL listener",
        )
    result = await authenticate_token(ctx.broker, auth, auth.sasl, request.auth_bytes, ctx.peer)
    if isinstance(result, AuthenticationFailed):
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=result.client_message
        )
    return SaslAuthenticateResponse(
        error_code=ErrorCode.NONE, error_message=None, auth_bytes=result, session_lifetime_ms=0
    )
