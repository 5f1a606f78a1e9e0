"""What one connection has established about its client: listener, principal, SASL state.

Made by the server when it accepts a connection (after the TLS handshake, when the listener
has TLS), read by the connection loop before each request (:meth:`admits`) and by the SASL
handlers, which advance it. Every request's context takes the principal it holds at the time
the request is handled.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal
from tributary.broker.security.sasl import SaslSession


@dataclass(eq=False, slots=True)
class ConnectionAuthentication:
    #: The listener's name (``INTERNAL``) and security protocol (``SASL_SSL``).
    listener: str
    protocol: str
    principal: KafkaPrincipal = ANONYMOUS
    #: On SASL listeners: the exchange, which must complete before other requests are served.
    sasl: SaslSession | None = None
    #: Set when the connection must close once the response in hand is on the wire
    #: (a failed authentication); the reason is logged.
    close_reason: str | None = None

    def admits(self, api_key: int) -> bool:
        return self.sasl is None or self.sasl.admits(api_key)

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.complete


__all__ = ["ConnectionAuthentication"]
