"""What a request handler knows about its request besides the body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.listeners import PLAINTEXT
from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal
from tributary.protocol.headers import RequestEnvelope

if TYPE_CHECKING:
    from tributary.broker.state import Broker


class CloseConnection(Exception):
    """Raised by request handling when the connection must close: a malformed or
    unsupported request, or a failed acks=0 produce (no response can carry the error)."""


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    envelope: RequestEnvelope
    peer: str
    # Who sent it: what the connection's authentication established (ANONYMOUS until then).
    principal: KafkaPrincipal = ANONYMOUS
    # The listener the connection came in on (its name, e.g. "INTERNAL"): Metadata and
    # FindCoordinator answer with that listener's addresses.
    listener: str = PLAINTEXT
    # The connection's authentication state (SaslHandshake and SaslAuthenticate advance it).
    authentication: ConnectionAuthentication | None = None
    # Run once the response has been sent, or the connection died: releases the
    # log segments a fetch pinned for sendfile.
    after_send: list[Callable[[], None]] = field(default_factory=list)

    @property
    def api_version(self) -> int:
        return self.envelope.api_version

    @property
    def client_id(self) -> str | None:
        return self.envelope.header.client_id
