"""Named listeners, Kafka's way: ``NAME://host:port`` and the security protocol of each name.

``listeners = "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9094"`` binds two ports;
``listener.security.protocol.map = "INTERNAL:SASL_SSL,EXTERNAL:SSL"`` says what each speaks. A
listener named after a protocol (``SASL_SSL://host:port``) needs no map entry, as with Kafka's
default map; given entries add to those defaults. Names are case-insensitive (kept upper-case);
an empty host binds every address and cannot be advertised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
DEFAULT_PROTOCOL_MAP: Mapping[str, str] = {p: p for p in PROTOCOLS}

# Kafka's listener grammar (CoreUtils.listenerListToEndPoints): NAME://[host]:port, IPv6 in brackets.
_ENDPOINT = re.compile(r"^([A-Za-z0-9_-]+)://\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)$")


class ListenerError(ValueError):
    """A listener setting that cannot be used; the message names the setting."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener's address: where it binds, or (advertised) where clients are sent."""

    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


def parse_protocol_map(setting: str, text: str) -> dict[str, str]:
    """``"INTERNAL:SASL_SSL,EXTERNAL:SSL"`` on top of the default map (each protocol maps to itself)."""
    result = dict(DEFAULT_PROTOCOL_MAP)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(
                f"setting '{setting}': {item!r} is not NAME:PROTOCOL with a protocol of {', '.join(PROTOCOLS)}"
            )
        result[name] = protocol
    return result


def parse_endpoints(setting: str, text: str, protocols: Mapping[str, str]) -> tuple[Endpoint, ...]:
    """Every ``NAME://host:port`` of a listener list; names unique."""
    endpoints: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ListenerError(f"setting '{setting}': {item!r} is not NAME://HOST:PORT")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if port > 65535:
            raise ListenerError(f"setting '{setting}': port {port} of {name} is not a port number")
        if name not in protocols:
            raise ListenerError(
                f"setting '{setting}': listener {name} has no security protocol: add {name}:PROTOCOL to "
                "listener.security.protocol.map"
            )
        if any(e.name == name for e in endpoints):
            raise ListenerError(f"setting '{setting}': listener {name} is named twice")
        endpoints.append(Endpoint(name, protocols[name], host, port))
    if not endpoints:
        raise ListenerError(f"setting '{setting}' names no listener")
    return tuple(endpoints)


def advertised_endpoints(
    listeners: tuple[Endpoint, ...], advertised: tuple[Endpoint, ...] | None
) -> tuple[Endpoint, ...]:
    """Each listener's advertised address: its entry in ``advertised.listeners``, or its own.

    Kafka's rules: an advertised name must be a listener's, and a wildcard address (an empty
    host, 0.0.0.0, ::) can be bound but never advertised."""
    given = {e.name: e for e in advertised or ()}
    names = {e.name for e in listeners}
    for name in given.keys() - names:
        raise ListenerError(f"setting 'advertised.listeners': {name} is not one of the listeners ({', '.join(names)})")
    result = []
    for listener in listeners:
        endpoint = given.get(listener.name, listener)
        if endpoint.host in ("", "0.0.0.0", "::"):
            raise ListenerError(
                f"listener {listener.name} binds every address ({listener}): give it a host clients can reach "
                "in 'advertised.listeners'"
            )
        result.append(endpoint)
    return tuple(result)


__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "PLAINTEXT",
    "PROTOCOLS",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SSL",
    "Endpoint",
    "ListenerError",
    "advertised_endpoints",
    "parse_endpoints",
    "parse_protocol_map",
]
