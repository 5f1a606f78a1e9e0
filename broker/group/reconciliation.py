"""Moving one member of a consumer group towards its target assignment (KIP-848's
reconciliation; Kafka's CurrentAssignmentBuilder), as a pure function.

Theory of operation. The coordinator computes a *target assignment* for every member at an
*assignment epoch*; a member does not get it in one step. A partition the member owns and
the target takes away must first be *revoked*: the member is told its assignment without it,
stops consuming it (committing first), and says so by no longer listing it among the owned
partitions of its next heartbeat. Until then the member keeps its epoch
(UNREVOKED_PARTITIONS) and nobody else may get the partition. A partition the target gives
the member is handed over only once no other member owns it (its *partition epoch* is -1);
meanwhile the member reaches the new epoch with what it can have (UNRELEASED_PARTITIONS) and
gets the rest on a later heartbeat. Hence the invariant the whole design serves: a partition
never has two owners, and a member that keeps a partition keeps consuming it throughout.

Member states, as Kafka numbers them in ConsumerGroupCurrentMemberAssignmentValue:
STABLE (0, at its epoch with everything it should have), UNREVOKED_PARTITIONS (1, waiting
for revocations), UNRELEASED_PARTITIONS (2, waiting for partitions others still own),
UNKNOWN (127, a state a newer version wrote: the member must start over).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from tributary.broker.group.consumer_records import Assignment

#: (topic id, partition) -> the epoch of its current owner, or -1 if it has none.
PartitionEpoch = Callable[[uuid.UUID, int], int]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class MustRejoin(Exception):
    """The member is in a state this coordinator cannot reconcile from (FENCED_MEMBER_EPOCH)."""


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A member's assignment state: what the coordinator stores per member."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def moved(self, epoch: int, state: MemberState, assigned: Assignment, pending_revocation: Assignment) -> Reconciled:
        """The member at ``epoch`` with this assignment; as Kafka's updateMemberEpoch, the
        previous epoch becomes the one it had (even when ``epoch`` is the same)."""
        return Reconciled(epoch, self.member_epoch, state, assigned, pending_revocation)


def owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None, of: Assignment) -> bool:
    """Whether the reported owned partitions include any of ``of``; an unreported set
    (None: the member did not say) counts as owning everything."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & partitions for topic, partitions in of.items())


def reconcile(
    current: Reconciled,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> Reconciled:
    """The member's next state: ``owned`` is what its heartbeat says it owns (None: not
    said). Returns ``current`` itself when nothing can move."""
    state = current.state

    def step(epoch: int) -> Reconciled:
        return _next(
            current, epoch, target_epoch=target_epoch, target=target, partition_epoch=partition_epoch, owned=owned
        )

    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return step(current.member_epoch)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending_revocation):
            return current
        # Every revocation is done: the member moves to the next epoch and on towards the target.
        return step(current.member_epoch + 1)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return step(current.member_epoch)
    # UNKNOWN: only a member that gave everything up may go on.
    if owned is None or any(owned.values()):
        raise MustRejoin("the member is in a state this coordinator does not know: it must rejoin")
    return step(target_epoch)


def _next(
    current: Reconciled,
    epoch: int,
    *,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
) -> Reconciled:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(current.assigned):
        wanted = target.get(topic, frozenset())
        had = current.assigned.get(topic, frozenset())
        keep = had & wanted
        if keep:
            assigned[topic] = keep
        if had - keep:
            revoking[topic] = had - keep
        # What the target adds, less what another member still owns.
        free = frozenset(p for p in wanted - keep if partition_epoch(topic, p) == -1)
        unreleased = unreleased or len(free) < len(wanted - keep)
        if free:
            pending[topic] = free
    if revoking and owns_any(owned, revoking):
        # Revoke first: the member stays at its epoch and is told its assignment without them.
        return current.moved(epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking)
    for topic, partitions in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return current.moved(target_epoch, state, assigned, {})
