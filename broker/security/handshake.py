"""What a listener does with a new connection before its first request: TLS, and a SASL exchange.

On SSL and SASL_SSL listeners the TLS handshake runs first (at most ``TLS_HANDSHAKE_TIMEOUT``).
On an SSL listener a client certificate (``ssl.client.auth = requested`` or ``required``) gives
the connection its principal, the subject mapped by ``ssl.principal.mapping.rules``; on SASL
listeners the principal comes from the SASL exchange, which the connection loop runs. A failed
handshake (a plaintext client, an expired certificate or one from an unknown CA, garbage, a
subject no rule maps) is a failed authentication: counted, logged at most once a few seconds
per listener and reason, and the connection closed. Nothing else is touched.
"""

from __future__ import annotations

import contextlib
import ssl

import trio

from tributary.broker.connection_limits import RateLimitedLog
from tributary.broker.metrics import BrokerMetrics
from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.config import ListenerConfig
from tributary.broker.security.mechanisms import CredentialLookup
from tributary.broker.security.principal import USER_TYPE, KafkaPrincipal
from tributary.broker.security.sasl import SaslSession
from tributary.broker.security.ssl_principal import PrincipalMappingError, subject_dn

#: The longest a TLS handshake may take (a client that opens a connection and says nothing
#: holds a descriptor no longer than this).
TLS_HANDSHAKE_TIMEOUT = 10.0


def _reason(exc: trio.BrokenResourceError) -> str:
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return cause.verify_message or str(cause)
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return str(cause or exc) or "the client closed the connection"


async def secure_connection(
    listener: ListenerConfig,
    stream: trio.abc.Stream,
    peer: str,
    *,
    lookup: CredentialLookup,
    metrics: BrokerMetrics,
    auth_log: RateLimitedLog,
) -> tuple[trio.abc.Stream, ConnectionAuthentication] | None:
    """The stream to serve (TLS-wrapped on TLS listeners) and the connection's authentication
    state; None when the handshake failed (the stream is closed then)."""
    name = listener.name
    auth = ConnectionAuthentication(name, listener.bind.protocol)
    if listener.bind.sasl:
        auth.sasl = SaslSession(listener.sasl_mechanisms, lookup)
    if listener.tls is None:
        return stream, auth
    tls = trio.SSLStream(stream, listener.tls.server_context, server_side=True)
    reason: str | None = None
    kind = "tls_handshake"
    try:
        with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
            await tls.do_handshake()
    except trio.TooSlowError:
        reason = f"no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:g} s"
    except trio.BrokenResourceError as exc:
        reason = f"TLS handshake failed: {_reason(exc)}"
    else:
        certificate = tls.getpeercert(binary_form=True)
        if certificate is not None and not listener.bind.sasl:
            dn = subject_dn(certificate)
            try:
                auth.principal = KafkaPrincipal(USER_TYPE, listener.tls.principal_mapper.name(dn))
            except PrincipalMappingError as exc:
                reason, kind = str(exc), "principal_mapping"
            else:
                metrics.authenticated(name, "SSL")
    if reason is None:
        return tls, auth
    metrics.authentication_failed(name, kind)
    auth_log.note(f"{name}/{kind}", f"authentication failed on listener {name} from {peer}: {reason}")
    with trio.CancelScope(shield=True):
        await _send_alert(tls, stream)
        await trio.aclose_forcefully(tls)
    return None


#: How long a refused client is given to take the TLS alert that says why.
ALERT_TIMEOUT = 1.0


async def _send_alert(tls: trio.SSLStream[trio.abc.Stream], stream: trio.abc.Stream) -> None:
    """Send the alert OpenSSL wrote when it refused the handshake (certificate expired, unknown
    CA, certificate required), so the client learns why rather than seeing a bare close. trio's
    SSLStream stops at the error with the alert still in its outgoing buffer; the buffer is read
    here by name, and nothing is sent if a later trio names it otherwise."""
    outgoing = getattr(tls, "_outgoing", None)
    if not isinstance(outgoing, ssl.MemoryBIO):
        return
    alert = outgoing.read()
    if alert:
        with (
            trio.move_on_after(ALERT_TIMEOUT),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
        ):
            await stream.send_all(alert)


__all__ = ["TLS_HANDSHAKE_TIMEOUT", "secure_connection"]
