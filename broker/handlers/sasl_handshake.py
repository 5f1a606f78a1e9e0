"""SaslHandshake: the client names its SASL mechanism (v0: raw tokens follow; v1: SaslAuthenticate).

On a listener without SASL, or once the exchange has begun, the answer is ILLEGAL_SASL_STATE (as
Kafka answers it). A mechanism the listener has not enabled gets UNSUPPORTED_SASL_MECHANISM with
the enabled list; that counts as a failed authentication and the connection closes after
``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import trio

from tributary.broker.context import RequestContext
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    auth = ctx.authentication
    if auth is None or auth.sasl is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(auth.sasl.enabled)
    if auth.sasl.handshake(request.mechanism, ctx.api_version):
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
    broker = ctx.broker
    reason = f"unsupported SASL mechanism {request.mechanism!r} (enabled: {', '.join(enabled)})"
    broker.metrics.authentication_failed(auth.listener, "unsupported_mechanism")
    broker.auth_log.note(
        f"{auth.listener}/unsupported_mechanism",
        f"authentication failed on listener {auth.listener} from {ctx.peer}: {reason}",
    )
    await trio.sleep(broker.config.security.failed_authentication_delay_ms / 1000)
    auth.close_reason = f"authentication failed: {reason}"
    return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
