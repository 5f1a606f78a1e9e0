"""Partition reassignment, sans-IO: the steps Kafka's controller takes (KIP-455), as pure functions.

A reassignment moves a partition from its original replicas (ORS) to target replicas (TRS):

1. start: the assignment becomes RS = TRS + ORS (in that order, without repeats), with
   ``adding`` = TRS - ORS and ``removing`` = ORS - TRS recorded beside it in the topic znode; the
   leader epoch is bumped, so every replica learns the new set. The added replicas fetch from
   the leader like any follower and join the ISR once caught up.
2. complete, once every target replica is in the ISR: the assignment becomes TRS, the ISR loses
   the removed replicas, leadership moves to a live in-sync target replica if the leader is being
   removed, and the epoch is bumped again. The removed replicas delete their logs.

A new target for a partition already moving replaces the old one (ORS stays what it was before
the first); a cancellation (target None) returns to ORS, dropping the replicas being added. The
ISR is only ever narrowed here, never widened: a replica counts as in sync only when its leader
says so.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tributary.broker.cluster.model import NO_LEADER
from tributary.broker.cluster.znodes import LeaderAndIsr


@dataclass(frozen=True, slots=True)
class Assignment:
    """A partition's replicas, and the reassignment under way (both empty when none is)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing)


def invalid_target(target: Sequence[int], live: Collection[int]) -> str | None:
    """Why a target replica list cannot be accepted, or None (Kafka's INVALID_REPLICA_ASSIGNMENT)."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"the replica list {list(target)} repeats a broker"
    unknown = sorted(set(target) - set(live))
    if unknown:
        return f"brokers {unknown} are not registered"
    return None


def start(current: Assignment, target: Sequence[int] | None) -> Assignment:
    """The assignment once a reassignment to ``target`` starts (None: cancel the one under way)."""
    original = current.original
    if target is None:
        return Assignment(original)
    replicas = tuple(dict.fromkeys([*target, *original]))
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return Assignment(replicas, adding, removing)


def moved_state(
    state: LeaderAndIsr, assignment: Assignment, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """The partition state that goes with a new assignment (started, cancelled or completed):
    the ISR keeps only assigned replicas, the leader stays if it is still assigned and alive,
    else the first live in-sync assigned replica leads; the epoch is bumped. None when no
    assigned replica alive is in the ISR (the change must wait)."""
    replicas = assignment.replicas
    isr = tuple(r for r in state.isr if r in replicas)
    if state.leader != NO_LEADER and state.leader in replicas and state.leader in live and state.leader in isr:
        leader = state.leader
    else:
        candidates = [r for r in replicas if r in isr and r in live]
        if not candidates:
            return None
        leader = candidates[0]
    return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch)


def completed(current: Assignment, isr: Collection[int]) -> Assignment | None:
    """The final assignment once every target replica is in sync, else None (keep waiting)."""
    if not current.moving:
        return None
    target = current.target
    if not all(r in isr for r in target):
        return None
    return Assignment(target)


__all__ = ["Assignment", "completed", "invalid_target", "moved_state", "start"]
