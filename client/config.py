"""Client settings, one frozen dataclass shared by every part of the client.

Durations are in seconds (floats, as trio counts time); the Kafka setting each
one corresponds to is named beside it. This module imports no trio: the
blocking fetcher uses it too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tributary.client.security.settings import PLAINTEXT, SecurityConfig
from tributary.protocol.framing import DEFAULT_MAX_FRAME_SIZE

#: What the client tells brokers it is (ApiVersions v3+ ``client_software_*``).
CLIENT_SOFTWARE_NAME = "tributary"
CLIENT_SOFTWARE_VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    #: ``client.id``: sent in every request header.
    client_id: str = "tributary"
    #: ``request.timeout.ms``: how long a request waits for its response. A
    #: request that times out closes its connection (as Kafka's clients do):
    #: responses arrive in order, so everything behind it is stuck too.
    request_timeout: float = 30.0
    #: ``socket.connection.setup.timeout.ms``: TCP connect plus ApiVersions.
    connect_timeout: float = 10.0
    #: ``max.in.flight.requests.per.connection``: requests sent and not yet answered.
    max_in_flight: int = 5
    #: ``send.buffer.bytes`` / ``receive.buffer.bytes``: SO_SNDBUF / SO_RCVBUF,
    #: set before connecting so the TCP window scale can use them. None keeps
    #: the OS default (on Linux, autotuning, which a fixed size switches off).
    #: For a mirror across a long link, set both near the bandwidth-delay product.
    send_buffer_bytes: int | None = None
    receive_buffer_bytes: int | None = None
    #: The largest response frame accepted (``socket.request.max.bytes``' counterpart).
    max_response_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Large responses a caller takes writable (the raw client's fetches) are received into
    #: buffers a cluster's connections keep for reuse (client/wire/buffers.py): at most this
    #: many bytes of them, in use or idle. A fresh buffer costs page faults and zeroing; a
    #: reader that holds many responses at once (the mirror) wants them all pooled.
    response_buffer_pool_bytes: int = 32 * 1024 * 1024
    #: ``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``: the wait before
    #: reconnecting to a broker doubles after each failed attempt, up to the
    #: maximum, with +-20% jitter; a successful connection resets it.
    reconnect_backoff: float = 0.05
    reconnect_backoff_max: float = 1.0
    #: ``retry.backoff.ms``: the pause before retrying a failed request, and
    #: the shortest interval between two metadata refreshes.
    retry_backoff: float = 0.1
    #: ``metadata.max.age.ms``: metadata is refreshed at least this often.
    metadata_max_age: float = 300.0
    #: ``default.api.timeout.ms``: how long admin operations keep retrying.
    api_timeout: float = 60.0
    #: ``security.protocol``, ``sasl.*``, ``ssl.*``: TLS and SASL (client/security/settings.py).
    security: SecurityConfig = PLAINTEXT

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {self.max_in_flight}")
        for name in ("request_timeout", "connect_timeout", "reconnect_backoff", "retry_backoff", "metadata_max_age"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.reconnect_backoff_max < self.reconnect_backoff:
            raise ValueError("reconnect_backoff_max must not be below reconnect_backoff")
        if self.response_buffer_pool_bytes < 0:
            raise ValueError(f"response_buffer_pool_bytes must not be negative, not {self.response_buffer_pool_bytes}")
        for name in ("send_buffer_bytes", "receive_buffer_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, not {value}")


_Settings = TypeVar("_Settings")


def split_settings(
    settings: Mapping[str, Any], own: type[_Settings], client_config: ClientConfig | None, what: str
) -> tuple[_Settings, ClientConfig]:
    """Split keyword settings between a component's own config dataclass (``own``)
    and the ClientConfig (whose fields go on top of ``client_config``). An unknown
    name raises TypeError, listing it."""
    own_fields = {f.name for f in dataclasses.fields(own)}  # type: ignore[arg-type]
    client_fields = {f.name for f in dataclasses.fields(ClientConfig)}
    unknown = sorted(set(settings) - own_fields - client_fields)
    if unknown:
        raise TypeError(f"unknown {what} settings: {', '.join(unknown)}")
    component = own(**{k: v for k, v in settings.items() if k in own_fields})
    client = dataclasses.replace(
        client_config or ClientConfig(), **{k: v for k, v in settings.items() if k in client_fields}
    )
    return component, client


__all__ = ["CLIENT_SOFTWARE_NAME", "CLIENT_SOFTWARE_VERSION", "ClientConfig", "split_settings"]
