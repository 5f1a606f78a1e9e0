"""When a warehouse's lease may be taken over (loader/lease.py), as a pure decision."""

from __future__ import annotations

import os
import subprocess
import sys

from tributary.loader.lease import Holder, is_stale, process_start

TTL = 120.0
NOW = 1_800_000_000.0


def holder(host: str = "other-host", pid: int = 4242, started: int | None = 7) -> Holder:
    return Holder("id", host, pid, started, NOW - 500)


def test_a_renewed_lease_of_another_host_holds_until_its_ttl() -> None:
    assert not is_stale(holder(), renewed_at=NOW - 10, now=NOW, ttl=TTL, host="here")
    assert not is_stale(holder(), renewed_at=NOW - TTL + 1, now=NOW, ttl=TTL, host="here")
    assert is_stale(holder(), renewed_at=NOW - TTL, now=NOW, ttl=TTL, host="here")


def test_an_unreadable_lease_is_nobodys() -> None:
    assert is_stale(None, renewed_at=NOW, now=NOW, ttl=TTL, host="here")


def test_a_live_process_of_this_host_holds_it() -> None:
    me = holder("here", os.getpid(), process_start(os.getpid()))
    assert not is_stale(me, renewed_at=NOW, now=NOW, ttl=TTL, host="here")


def test_a_dead_or_recycled_process_of_this_host_does_not() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = int(gone.stdout)
    assert process_start(dead) is None
    assert is_stale(holder("here", dead, 12345), renewed_at=NOW, now=NOW, ttl=TTL, host="here")
    # The same pid running another program since: its start time differs.
    recycled = holder("here", os.getpid(), (process_start(os.getpid()) or 0) + 1)
    assert is_stale(recycled, renewed_at=NOW, now=NOW, ttl=TTL, host="here")


def test_holders_round_trip_and_cut_short_files_are_unreadable() -> None:
    h = holder()
    assert Holder.from_json(h.to_json()) == h
    assert Holder.from_json(h.to_json()[:20]) is None
