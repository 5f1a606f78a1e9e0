"""Caps on client connections: broker-wide (``max.connections``) and per client IP
(``max.connections.per.ip``).

Sans-IO: the server asks :meth:`ConnectionLimits.admit` for every accepted socket
and closes it at once when refused (as Kafka does for a connection over its
per-IP quota), so the file descriptors, buffers and tasks of a connection flood
stay bounded and everyone already connected keeps being served.

Refusals come in floods, so they are logged through :class:`RateLimitedLog`: the
first of each reason at once, then at most one line per reason per interval,
with how many were refused meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum


class Refusal(StrEnum):
    """Why a connection was refused; the value is the metric's ``reason`` label."""

    MAX_CONNECTIONS = "max_connections"
    MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"


class ConnectionLimits:
    __slots__ = ("_by_ip", "max_connections", "max_per_ip", "open")

    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.open = 0
        self._by_ip: dict[str, int] = {}

    def connections_from(self, ip: str) -> int:
        return self._by_ip.get(ip, 0)

    def admit(self, ip: str) -> Refusal | None:
        """Count a new connection from ``ip``, or say why it is refused (and count nothing).
        Every admitted connection is given back with :meth:`release`."""
        if self.open >= self.max_connections:
            return Refusal.MAX_CONNECTIONS
        from_ip = self._by_ip.get(ip, 0)
        if from_ip >= self.max_per_ip:
            return Refusal.MAX_CONNECTIONS_PER_IP
        self.open += 1
        self._by_ip[ip] = from_ip + 1
        return None

    def release(self, ip: str) -> None:
        remaining = self._by_ip[ip] - 1
        if remaining:
            self._by_ip[ip] = remaining
        else:
            del self._by_ip[ip]  # no entry per address ever seen: the map stays as small as the open set
        self.open -= 1


class RateLimitedLog:
    """At most ``burst`` WARNING lines per key per ``interval`` seconds of ``clock``."""

    __slots__ = ("_burst", "_clock", "_interval", "_logged", "_logger", "_suppressed", "_window")

    def __init__(self, logger: logging.Logger, interval: float, clock: Callable[[], float], *, burst: int = 1) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._burst = burst
        self._window: dict[str, float] = {}
        self._logged: dict[str, int] = {}
        self._suppressed: dict[str, int] = {}

    def note(self, key: str, message: str) -> bool:
        """Log ``message`` unless ``burst`` lines for ``key`` went out in the current window of
        ``interval`` seconds; returns whether it was logged. The first line of a new window
        says how many were skipped in the last."""
        now = self._clock()
        start = self._window.get(key)
        if start is None or now - start >= self._interval:
            self._window[key] = now
            self._logged[key] = 0
        elif self._logged[key] >= self._burst:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        skipped = self._suppressed.pop(key, 0)
        if skipped and start is not None:
            message = f"{message} ({skipped} more like it not logged in the last {now - start:.0f} s)"
        self._logged[key] += 1
        self._logger.warning("%s", message)
        return True
