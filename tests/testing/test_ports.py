"""Free ports, from the kernel or from a range of one's own (TRIBUTARY_TEST_PORTS)."""

from __future__ import annotations

import socket

import pytest

from tributary.testing.ports import RANGE_VARIABLE, free_port, free_ports, port_range


def test_ports_are_drawn_from_the_range_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # This worker's own range under pytest-xdist (tests/fixtures/xdist.py), else one for the test.
    ports = port_range() or range(40000, 41000)
    monkeypatch.setenv(RANGE_VARIABLE, f"{ports.start}-{ports.start + 99}")
    chosen = free_ports(50)
    assert len(set(chosen)) == 50
    assert all(ports.start <= port < ports.start + 100 for port in chosen)
    assert ports.start <= free_port() < ports.start + 100


def test_a_port_in_use_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        monkeypatch.setenv(RANGE_VARIABLE, f"{port}-{port}")
        with pytest.raises(OSError, match=r"no free port on 127\.0\.0\.1 in"):
            free_port()


@pytest.mark.parametrize("spec", ["20000", "x-y", "30000-20000", "0-10", "65000-70000"])
def test_a_bad_range_is_named(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(RANGE_VARIABLE, spec)
    with pytest.raises(ValueError, match=RANGE_VARIABLE):
        free_port()


def test_without_a_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RANGE_VARIABLE, raising=False)
    assert len(set(free_ports(20))) == 20
