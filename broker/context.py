"""What a request handler knows about its request besides the body."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.listeners import PLAINTEXT
from tributary.broker.security.principal import ANONYMOUS, KafkaPrincipal
from tributary.protocol.acl import CLUSTER_NAME, OPERATIONS_OF, AclOperation, ResourceType
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

    @property
    def host(self) -> str:
        """The client's IP address, as ACLs name hosts: ``peer`` without its port."""
        host, sep, port = self.peer.rpartition(":")
        return host.strip("[]") if sep and port.isdigit() else self.peer

    # --- authorization: every handler asks before it acts (broker/security/acl_authorizer.py)

    def authorize(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log_denied: bool = True
    ) -> bool:
        """Whether this request's principal may perform ``operation`` on the resource. Pass
        ``log_denied=False`` when a refusal only filters what the answer shows (the topics of
        an all-topics Metadata), rather than refusing something the request named."""
        return self.broker.authorizer.authorize(
            self.principal, self.host, operation, resource_type, name,
            api_key=self.envelope.api_key, log_denied=log_denied,
        )  # fmt: skip

    def authorize_cluster(self, operation: AclOperation, *, log_denied: bool = True) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def authorized(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str], *, log_denied: bool = True
    ) -> set[str]:
        """The names among ``names`` the principal may perform ``operation`` on (each asked once)."""
        if not self.broker.authorizer.enabled:
            return set(names)
        return {n for n in set(names) if self.authorize(operation, resource_type, n, log_denied=log_denied)}

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The bit field Metadata and DescribeGroups answer when asked for the "authorized
        operations": bit ``op`` set for each operation of the type the principal may perform."""
        return sum(
            1 << op for op in OPERATIONS_OF[resource_type] if self.authorize(op, resource_type, name, log_denied=False)
        )

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may perform ``operation`` on some resource of the type."""
        return self.broker.authorizer.authorize_any(self.principal, self.host, operation, resource_type)
