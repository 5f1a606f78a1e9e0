"""The server-side assignors of ``consumer`` groups (KIP-848): ``uniform`` and ``range``.

In a consumer group the coordinator, not a member, computes the *target assignment*: which
partitions each member should own once the group has settled. ``group.consumer.assignors``
lists the assignors a member may ask for (ConsumerGroupHeartbeat's ServerAssignor); the first
is the default. Both are pure functions of the members' subscriptions (topic ids), their
previous target assignment and the partition counts.

- ``uniform`` (Kafka's UniformAssignor): every partition of every subscribed topic goes to a
  member subscribed to it, the counts of partitions per member as even as the subscriptions
  allow (with one subscription shared by all, no member has two more than another), and as
  little moves as that permits: a member keeps what it had in the previous target unless it
  holds more than its share. Kafka reaches the same properties with other code (its
  homogeneous and heterogeneous builders); which partition moves where when several
  choices are as good may differ.
- ``range`` (Kafka's RangeAssignor, server side): for each topic, the members subscribed to
  it in order (static members by instance id first, then the others by member id) each take
  a contiguous range, the first ``partitions % members`` one partition more. Members that
  subscribe to the same topics get the same partition numbers of each: co-partitioning.
  Not sticky, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: Partitions by topic id.
Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    topics: frozenset[uuid.UUID]
    instance_id: str | None = None
    #: The member's share of the previous target assignment (for stickiness).
    current: Assignment = field(default_factory=dict)


#: members, topic id -> partition count (only topics that exist) -> each member's target.
ServerAssignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, Assignment]]


def _as_assignment(partitions: set[TopicPartition]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, set()).add(p)
    return {topic: frozenset(ps) for topic, ps in by_topic.items()}


def uniform(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()
    # 1. Stickiness: each member keeps what it had, if it still subscribes to it and it exists.
    for member_id in sorted(members):
        spec = members[member_id]
        for topic, partitions in spec.current.items():
            if topic not in spec.topics or topic not in topics:
                continue
            for p in partitions:
                if p < topics[topic] and (topic, p) not in taken:
                    owned[member_id].add((topic, p))
                    taken.add((topic, p))
    eligible: dict[uuid.UUID, list[str]] = {
        topic: sorted(m for m, spec in members.items() if topic in spec.topics) for topic in topics
    }
    # 2. Each partition nobody kept goes to the least loaded member that may take it, the
    # most constrained partitions (fewest eligible members) first.
    free = sorted(
        ((t, p) for t, n in topics.items() if eligible[t] for p in range(n) if (t, p) not in taken),
        key=lambda tp: (len(eligible[tp[0]]), tp[0].bytes, tp[1]),
    )
    for topic, p in free:
        target = min(eligible[topic], key=lambda m: (len(owned[m]), m))
        owned[target].add((topic, p))
    # 3. Balance: move a partition from a member to an eligible one holding two or more
    # fewer, until no such move exists. Each move lowers the sum of squared counts, so this
    # ends; it moves only what balance requires, so kept partitions mostly stay.
    while _move_one(owned, eligible):
        pass
    return {m: _as_assignment(ps) for m, ps in owned.items()}


def _move_one(owned: dict[str, set[TopicPartition]], eligible: Mapping[uuid.UUID, list[str]]) -> bool:
    for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        donor_count = len(owned[donor])
        best: tuple[int, str, TopicPartition] | None = None
        for topic, p in sorted(owned[donor], key=lambda tp: (tp[0].bytes, -tp[1])):
            for taker in eligible[topic]:
                count = len(owned[taker])
                if taker != donor and donor_count - count >= 2 and (best is None or (count, taker) < best[:2]):
                    best = (count, taker, (topic, p))
        if best is not None:
            _, taker, tp = best
            owned[donor].discard(tp)
            owned[taker].add(tp)
            return True
    return False


def _range_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Kafka's order: static members by instance id first, then dynamic ones by member id."""

    def key(member_id: str) -> tuple[int, str]:
        instance = members[member_id].instance_id
        return (0, instance) if instance is not None else (1, member_id)

    return sorted(members, key=key)


def range_(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    order = _range_order(members)
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
    for topic, count in topics.items():
        subscribed = [m for m in order if topic in members[m].topics]
        if not subscribed:
            continue
        quota, extra = divmod(count, len(subscribed))
        start = 0
        for i, member_id in enumerate(subscribed):
            size = quota + (1 if i < extra else 0)
            if size:
                result[member_id][topic] = frozenset(range(start, start + size))
            start += size
    return {m: dict(a) for m, a in result.items()}


#: Kafka's names for them, as ``group.consumer.assignors`` and ServerAssignor spell them.
SERVER_ASSIGNORS: dict[str, ServerAssignor] = {"uniform": uniform, "range": range_}
#: The Java class names Kafka also accepts in ``group.consumer.assignors``.
ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
