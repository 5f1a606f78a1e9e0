"""The sticky assignors' fast path, for groups whose members all subscribe to the same topics.

Kafka's AbstractStickyAssignor.ConstrainedAssignmentBuilder (without racks):
with P partitions and N members, everyone ends with minQuota = P // N or
maxQuota = ceil(P / N) partitions, exactly P % N of them with maxQuota.

1. Each member keeps its owned partitions (sorted by partition number, then
   topic): all of them if fewer than minQuota; maxQuota of them while fewer
   than P % N members have been given maxQuota; minQuota otherwise.
2. The partitions nobody kept, sorted by (topic, partition), are dealt round
   robin to the members still under minQuota, then one each to members at
   minQuota until P % N members hold maxQuota.

Kafka walks members in HashMap order in step 1, which decides who may keep
maxQuota when more members own that many than may; we walk them in member-id
order, so the result is deterministic (and as sticky: the number of kept
partitions is the same in either order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tributary.client.group.assignors.model import TopicPartition


def constrained_assign(
    counts: Mapping[str, int], members: Sequence[str], owned: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """``members`` in the order to process them (sorted); ``owned`` already validated and disjoint."""
    total = sum(counts.values())
    quotas = _Quotas(*divmod(total, len(members)))
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    under_min, at_min = _keep_owned(quotas, members, owned, assignment)
    kept = {tp for tps in assignment.values() for tp in tps}
    unassigned = [(t, p) for t in sorted(counts) for p in range(counts[t]) if (t, p) not in kept]
    _deal(quotas, unassigned, under_min, at_min, assignment)
    for member in under_min:
        if len(assignment[member]) != quotas.min:
            raise RuntimeError(f"sticky assignment left {member} below minQuota {quotas.min}")
    return assignment


class _Quotas:
    """minQuota, maxQuota, and how many members get maxQuota (P % N) versus how many have so far."""

    def __init__(self, min_quota: int, expected_over_min: int) -> None:
        self.min = min_quota
        self.max = min_quota + (1 if expected_over_min else 0)
        self.expected_over_min = expected_over_min
        self.over_min = 0

    @property
    def may_exceed_min(self) -> bool:
        return self.over_min < self.expected_over_min


def _keep_owned(
    quotas: _Quotas,
    members: Sequence[str],
    owned: Mapping[str, Sequence[TopicPartition]],
    assignment: dict[str, list[TopicPartition]],
) -> tuple[list[str], list[str]]:
    """Step 1. Returns the members under minQuota, and those at minQuota that may take one more."""
    under_min: list[str] = []
    at_min: list[str] = []
    for member in members:
        mine = sorted(owned.get(member, ()), key=lambda tp: (tp[1], tp[0]))
        if len(mine) < quotas.min:
            keep = mine
            under_min.append(member)
        elif len(mine) >= quotas.max and quotas.may_exceed_min:
            keep = mine[: quotas.max]
            quotas.over_min += 1
            if not quotas.may_exceed_min:
                at_min.clear()  # nobody else may go above minQuota now
        else:
            keep = mine[: quotas.min]
            if quotas.may_exceed_min:
                at_min.append(member)
        assignment[member].extend(keep)
    return under_min, at_min


def _deal(
    quotas: _Quotas,
    unassigned: Sequence[TopicPartition],
    under_min: list[str],
    at_min: list[str],
    assignment: dict[str, list[TopicPartition]],
) -> None:
    """Step 2, round robin over the members under minQuota, as Kafka's iterator does.

    A member reaching minQuota leaves the rotation (and may later take one
    more); once the rotation is empty, members at minQuota take one each in
    order. Both lists are in member-id order (Kafka sorts them).
    """
    turn = 0
    for tp in unassigned:
        if turn < len(under_min):
            member = under_min[turn]
            turn += 1
        elif under_min:
            member = under_min[0]
            turn = 1
        elif at_min:
            member = at_min.pop(0)
        else:
            raise RuntimeError(f"sticky assignment: no member can take {tp} (quota bookkeeping is broken)")
        assignment[member].append(tp)
        count = len(assignment[member])
        if count == quotas.min:
            del under_min[turn - 1]
            turn -= 1
            at_min.append(member)
        elif count == quotas.max:
            quotas.over_min += 1
