"""max.connections and max.connections.per.ip, sans-IO: who is admitted, and how refusals
are logged without flooding the log."""

from __future__ import annotations

import logging

import pytest

from tributary.broker.connection_limits import ConnectionLimits, RateLimitedLog, Refusal


def test_broker_wide_cap() -> None:
    limits = ConnectionLimits(max_connections=3, max_per_ip=100)
    assert [limits.admit(f"10.0.0.{i}") for i in range(3)] == [None, None, None]
    assert limits.admit("10.0.0.9") is Refusal.MAX_CONNECTIONS
    assert limits.open == 3  # a refusal counts nothing
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.9") is None


def test_per_ip_cap_leaves_other_addresses_alone() -> None:
    limits = ConnectionLimits(max_connections=100, max_per_ip=2)
    assert [limits.admit("10.0.0.1") for _ in range(2)] == [None, None]
    assert limits.admit("10.0.0.1") is Refusal.MAX_CONNECTIONS_PER_IP
    assert limits.admit("10.0.0.2") is None
    assert (limits.open, limits.connections_from("10.0.0.1"), limits.connections_from("10.0.0.2")) == (3, 2, 1)
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1") is None


def test_the_broker_wide_cap_is_reported_first() -> None:
    limits = ConnectionLimits(max_connections=1, max_per_ip=1)
    assert limits.admit("10.0.0.1") is None
    assert limits.admit("10.0.0.1") is Refusal.MAX_CONNECTIONS


def test_addresses_are_forgotten_once_their_last_connection_closes() -> None:
    limits = ConnectionLimits(max_connections=10_000, max_per_ip=10)
    for i in range(1000):
        assert limits.admit(f"10.0.{i // 256}.{i % 256}") is None
    for i in range(1000):
        limits.release(f"10.0.{i // 256}.{i % 256}")
    assert limits.open == 0
    assert limits._by_ip == {}


def test_refusals_are_logged_at_most_once_per_interval_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("test.refusals"), 10.0, lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.refusals"):
        logged = [log.note("max_connections", f"refused {i}") for i in range(1000)]
        assert log.note("max_connections_per_ip", "refused by ip")  # another reason has its own line
        now[0] = 9.9
        assert not log.note("max_connections", "still refusing")
        now[0] = 10.0
        assert log.note("max_connections", "refused again")
        now[0] = 30.0
        assert log.note("max_connections", "after a quiet spell")
    assert logged.count(True) == 1
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused by ip",
        "refused again (1000 more like it not logged in the last 10 s)",
        "after a quiet spell",
    ]


def test_a_burst_allows_several_lines_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("test.auth"), 10.0, lambda: now[0], burst=3)
    with caplog.at_level(logging.WARNING, "test.auth"):
        logged = [log.note("SECURE/bad_credentials", f"failed {i}") for i in range(10)]
        now[0] = 10.0
        assert log.note("SECURE/bad_credentials", "failed again")
    assert logged == [True, True, True] + [False] * 7
    assert [r.getMessage() for r in caplog.records][-1] == "failed again (7 more like it not logged in the last 10 s)"
