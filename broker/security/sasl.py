"""A connection's SASL exchange on a SASL listener, as a state machine (Kafka's rules).

Theory of operation
-------------------
Until the exchange completes only three requests are served, as Kafka's
SaslServerAuthenticator serves them:

``HANDSHAKE``
    ApiVersions (any number of times), then SaslHandshake naming a mechanism. A mechanism the
    listener has not enabled is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, and
    the connection is closed.
``AUTHENTICATE``
    SaslAuthenticate requests carry the mechanism's tokens (v1 handshakes). After a v0
    handshake the tokens arrive raw instead, each a length-prefixed frame without a request
    header (KIP-43's original form; ``raw_tokens`` tells the connection loop).
``COMPLETE``
    The user is known; every request is served with ``User:<name>`` as its principal.
``FAILED``
    The response (SASL_AUTHENTICATION_FAILED with the reason Kafka gives) goes out after
    ``connection.failed.authentication.delay.ms`` and the connection closes.

Any other request before ``COMPLETE``, or a second handshake, is an illegal state: the
connection closes. Re-authentication (KIP-368) is not offered: SaslAuthenticate answers
``session_lifetime_ms = 0``, which tells clients never to re-authenticate.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tributary.broker.security.mechanisms import (
    AuthenticationFailed,
    CredentialLookup,
    ServerMechanism,
    server_mechanism,
)
from tributary.broker.security.principal import USER_TYPE, KafkaPrincipal
from tributary.protocol.messages import ApiKey

#: What a connection may send before it has authenticated.
PRE_AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class Phase(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one token: the answer, or a failure (client message, log reason, metric kind)."""

    token: bytes = b""
    failure: AuthenticationFailed | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None


class SaslSession:
    def __init__(self, enabled: tuple[str, ...], lookup: CredentialLookup) -> None:
        self.enabled = enabled
        self._lookup = lookup
        self.phase = Phase.HANDSHAKE
        self.mechanism: ServerMechanism | None = None
        #: After a v0 SaslHandshake: tokens arrive as raw frames, not SaslAuthenticate requests.
        self.raw_tokens = False
        self.principal: KafkaPrincipal | None = None

    @property
    def complete(self) -> bool:
        return self.phase is Phase.COMPLETE

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served now (anything else closes the connection)."""
        if self.phase is Phase.COMPLETE:
            return api_key != ApiKey.SASL_HANDSHAKE  # no re-authentication
        if self.phase is Phase.HANDSHAKE:
            return api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
        if self.phase is Phase.AUTHENTICATE:
            return api_key == ApiKey.SASL_AUTHENTICATE and not self.raw_tokens
        return False

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (the exchange may start)."""
        if self.phase is not Phase.HANDSHAKE:
            raise IllegalSaslState(f"SaslHandshake in state {self.phase.value}")
        if mechanism not in self.enabled:
            self.phase = Phase.FAILED
            return False
        self.mechanism = server_mechanism(mechanism, self._lookup)
        self.raw_tokens = version == 0
        self.phase = Phase.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> Step:
        """One token of the exchange (a SaslAuthenticate's auth_bytes, or a raw v0 frame)."""
        if self.phase is not Phase.AUTHENTICATE or self.mechanism is None:
            raise IllegalSaslState(f"a SASL token in state {self.phase.value}")
        try:
            answer = self.mechanism.step(token)
        except AuthenticationFailed as failure:
            self.phase = Phase.FAILED
            return Step(failure=failure)
        if self.mechanism.complete:
            self.phase = Phase.COMPLETE
            self.principal = KafkaPrincipal(USER_TYPE, self.mechanism.username)
        return Step(answer)


class IllegalSaslState(Exception):
    """A request the SASL exchange does not allow now: the connection closes (ILLEGAL_SASL_STATE)."""


__all__ = ["PRE_AUTHENTICATION_APIS", "IllegalSaslState", "Phase", "SaslSession", "Step"]
