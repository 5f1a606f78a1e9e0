"""The sticky assignors' general path, for groups whose members subscribe to different topics.

Kafka's AbstractStickyAssignor.GeneralAssignmentBuilder (without racks):

1. Keep every member's valid owned partitions (dropping those of topics it no
   longer subscribes to, which forces a revocation).
2. Give each remaining partition (topics with the fewest subscribers first) to
   the least-loaded subscribed member.
3. Rebalance: while the assignment is not balanced -- some member could take a
   partition from a member holding two or more more partitions than it --
   move partitions towards the least-loaded members, preferring to move a
   partition back to its owner of the previous generation, and undoing earlier
   moves rather than chaining them (PartitionMovements). If the moves did not
   lower the balance score (the sum of load differences over all member
   pairs), keep the assignment from before them: stickiness wins ties.

Members are ordered by (load, member id) wherever Kafka uses its sorted set,
and by member id where Kafka iterates a HashMap.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from tributary.client.group.assignors.model import TopicPartition, java_order

ConsumerPair = tuple[str, str]  # (source member, destination member) of a move


class _PartitionMovements:
    """Where each moved partition came from, so a later move can undo an earlier one.

    Kafka keeps this to avoid moving partitions of a topic in a cycle
    (A -> B here, B -> A there): when a partition should go from C to N and
    some partition of the same topic already went from N to C's source, that
    one goes back instead.
    """

    def __init__(self) -> None:
        self._moves: dict[TopicPartition, ConsumerPair] = {}
        self._by_topic: dict[str, dict[ConsumerPair, set[TopicPartition]]] = {}

    def _remove(self, tp: TopicPartition) -> ConsumerPair:
        pair = self._moves.pop(tp)
        by_pair = self._by_topic[tp[0]]
        by_pair[pair].discard(tp)
        if not by_pair[pair]:
            del by_pair[pair]
        if not by_pair:
            del self._by_topic[tp[0]]
        return pair

    def _add(self, tp: TopicPartition, pair: ConsumerPair) -> None:
        self._moves[tp] = pair
        self._by_topic.setdefault(tp[0], {}).setdefault(pair, set()).add(tp)

    def record(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self._moves:
            source, _ = self._remove(tp)
            if source != new:  # not simply going home
                self._add(tp, (source, new))
        else:
            self._add(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        by_pair = self._by_topic.get(tp[0])
        if by_pair is None:
            return tp
        if tp in self._moves:
            old = self._moves[tp][0]
        reverse = by_pair.get((new, old))
        if not reverse:
            return tp
        return min(reverse)  # Kafka takes whichever a HashSet yields first


class _LoadOrder:
    """Members sorted by (number of partitions, member id): Kafka's TreeSet with SubscriptionComparator.

    A member's key changes with its load, so callers remove it before changing
    its assignment and add it back after, exactly as Kafka does.
    """

    def __init__(self, assignment: Mapping[str, list[TopicPartition]], rank: Mapping[str, int]) -> None:
        self._assignment = assignment
        self._rank = rank
        self._keys: list[tuple[int, int, str]] = sorted((len(assignment[m]), rank[m], m) for m in assignment)

    def _key(self, member: str) -> tuple[int, int, str]:
        return (len(self._assignment[member]), self._rank[member], member)

    def remove(self, member: str) -> None:
        key = self._key(member)
        i = bisect.bisect_left(self._keys, key)
        if i < len(self._keys) and self._keys[i] == key:
            del self._keys[i]

    def add(self, member: str) -> None:
        bisect.insort(self._keys, self._key(member))

    def members(self) -> list[str]:
        return [m for _, _, m in self._keys]

    def __len__(self) -> int:
        return len(self._keys)


def balance_score(assignment: Mapping[str, Sequence[TopicPartition]]) -> int:
    """Sum over all member pairs of the difference in their partition counts (0 = perfectly even)."""
    sizes = sorted(len(v) for v in assignment.values())
    n = len(sizes)
    # In sorted order, sizes[i] is larger than i others and smaller than n - 1 - i.
    return sum(size * (2 * i - n + 1) for i, size in enumerate(sizes))


class _GeneralBuilder:
    def __init__(
        self,
        counts: Mapping[str, int],
        topics_of: Mapping[str, frozenset[str]],
        owned: Mapping[str, Sequence[TopicPartition]],
        prev_owner: Mapping[TopicPartition, str],
    ) -> None:
        self.counts = counts
        self.prev_owner = prev_owner
        members = sorted(topics_of, key=java_order)
        self.rank = {m: i for i, m in enumerate(members)}
        # Only existing topics count: a member subscribed to a deleted topic simply cannot get it.
        self.topics_of = {m: frozenset(t for t in topics_of[m] if t in counts) for m in members}
        self.subscribers: dict[str, list[str]] = {t: [] for t in counts}
        for m in members:
            for t in sorted(self.topics_of[m]):
                self.subscribers[t].append(m)
        self.max_size = {m: sum(counts[t] for t in self.topics_of[m]) for m in members}
        self.current: dict[str, list[TopicPartition]] = {m: list(owned.get(m, ())) for m in members}
        self.owner: dict[TopicPartition, str] = {tp: m for m, tps in self.current.items() for tp in tps}
        sorted_topics = sorted(counts, key=lambda t: (len(self.subscribers[t]), t))
        self.sorted_partitions = [(t, p) for t in sorted_topics for p in range(counts[t])]
        self.order = _LoadOrder(self.current, self.rank)
        self.movements = _PartitionMovements()

    def build(self) -> dict[str, list[TopicPartition]]:
        revocation_required = False
        kept: set[TopicPartition] = set()
        for member, tps in self.current.items():
            keep = []
            for tp in tps:
                if tp[0] in self.topics_of[member]:
                    keep.append(tp)
                    kept.add(tp)
                else:
                    revocation_required = True  # unsubscribed: must go elsewhere
            tps[:] = keep
        self.order = _LoadOrder(self.current, self.rank)
        unassigned = [tp for tp in self.sorted_partitions if tp not in kept]
        self._balance(unassigned, revocation_required)
        return self.current

    def _move_to(self, tp: TopicPartition, member: str) -> None:
        self.order.remove(member)
        self.current[member].append(tp)
        self.owner[tp] = member
        self.order.add(member)

    def _least_loaded_subscriber(self, topic: str) -> str | None:
        for member in self.order.members():
            if topic in self.topics_of[member]:
                return member
        return None

    def _can_participate(self, member: str) -> bool:
        """Whether any of the member's partitions could move, or it could take more."""
        if len(self.current[member]) < self.max_size[member]:
            return True
        return any(len(self.subscribers[tp[0]]) >= 2 for tp in self.current[member])

    def _balance(self, unassigned: list[TopicPartition], revocation_required: bool) -> None:
        order_members = self.order.members()
        initializing = not order_members or not self.current[order_members[-1]]
        for tp in unassigned:
            member = self._least_loaded_subscriber(tp[0])
            if member is not None:
                self._move_to(tp, member)

        # Only partitions with two or more possible members, and members that can change, take part.
        movable = {t for t, subs in self.subscribers.items() if len(subs) >= 2}
        reassignable = [tp for tp in self.sorted_partitions if tp[0] in movable]
        unassigned = [tp for tp in unassigned if tp[0] in movable]
        fixed: dict[str, list[TopicPartition]] = {}
        for member in list(self.current):
            if not self._can_participate(member):
                self.order.remove(member)
                fixed[member] = self.current.pop(member)

        before = {m: list(tps) for m, tps in self.current.items()}
        before_owner = dict(self.owner)
        # Without forced revocations, first try to balance by moving only the new partitions.
        if not revocation_required:
            self._reassign(unassigned)
        moved = self._reassign(reassignable)
        if not initializing and moved and balance_score(self.current) >= balance_score(before):
            self.current.clear()
            self.current.update(before)
            self.owner = before_owner
        self.current.update(fixed)

    def _is_balanced(self) -> bool:
        members = self.order.members()
        if len(members) < 2:
            return True
        if len(self.current[members[0]]) >= len(self.current[members[-1]]) - 1:
            return True
        # Kafka asks, member by member, whether any partition it could own sits with
        # a member holding at least two more than it. Per topic, only the most
        # loaded holder matters (a member is never two more than itself).
        busiest: dict[str, int] = {}
        for tps in self.current.values():
            load = len(tps)
            for topic, _ in tps:
                if load > busiest.get(topic, -1):
                    busiest[topic] = load
        for member in members:
            load = len(self.current[member])
            if load == self.max_size[member]:
                continue
            if any(load + 1 < busiest.get(t, -1) for t in self.topics_of[member]):
                return False
        return True

    def _reassign(self, partitions: Sequence[TopicPartition]) -> bool:
        """Kafka's performReassignments: sweep until balanced or nothing moves."""
        performed = False
        # Each move Kafka makes lowers the imbalance, so this bound is never reached;
        # it only guarantees that a leader cannot spin forever on a bug.
        budget = 4 * len(self.owner) + 16
        modified = True
        while modified and budget > 0:
            modified = False
            for tp in partitions:
                if budget <= 0 or self._is_balanced():
                    break
                holder = self.owner.get(tp)
                if holder is None or holder not in self.current:
                    continue
                load = len(self.current[holder])
                prev = self.prev_owner.get(tp)
                # Back to the previous generation's owner if that evens things out. Kafka does not
                # check that the owner still takes part and subscribes to the topic; we do, so a
                # stale claim can never hand a member a topic it has dropped.
                if (
                    prev is not None
                    and prev in self.current
                    and tp[0] in self.topics_of[prev]
                    and load > len(self.current[prev]) + 1
                ):
                    self._reassign_partition(tp, prev)
                    performed = modified = True
                    budget -= 1
                    continue
                for other in self.subscribers[tp[0]]:
                    if other in self.current and load > len(self.current[other]) + 1:
                        target = self._least_loaded_subscriber(tp[0])
                        if target is not None:
                            self._reassign_partition(tp, target)
                            performed = modified = True
                            budget -= 1
                        break
        return performed

    def _reassign_partition(self, tp: TopicPartition, new: str) -> None:
        actual = self.movements.partition_to_move(tp, self.owner[tp], new)
        old = self.owner[actual]
        self.order.remove(old)
        self.order.remove(new)
        self.movements.record(actual, old, new)
        self.current[old].remove(actual)
        self.current[new].append(actual)
        self.owner[actual] = new
        self.order.add(new)
        self.order.add(old)


def general_assign(
    counts: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    owned: Mapping[str, Sequence[TopicPartition]],
    prev_owner: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """``owned``: validated, disjoint current ownership; ``prev_owner``: each partition's
    owner in the newest generation before the current one (Kafka's prevAssignment)."""
    return _GeneralBuilder(counts, topics_of, owned, prev_owner).build()
