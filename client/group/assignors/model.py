"""What the group leader knows of each member, and what it hands back.

Partitions are ``(topic, partition)`` tuples throughout: hashable, and ordered
the way Kafka's ``TopicPartitionComparator`` orders them (topic, then number).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

TopicPartition = tuple[str, int]
RebalanceProtocol = Literal["eager", "cooperative"]

# Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: "no generation known".
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member's ConsumerProtocolSubscription, plus its JoinGroup group_instance_id.

    ``owned`` is the OwnedPartitions field (v1+) and ``generation`` the
    GenerationId field (v2+, -1 when absent); ``rack`` is RackId (v3+, None
    when absent or empty).
    """

    topics: Sequence[str]
    owned: Mapping[str, Sequence[int]] = field(default_factory=dict)
    generation: int = NO_GENERATION
    user_data: bytes | None = None
    group_instance_id: str | None = None
    rack: str | None = None

    def owned_partitions(self) -> list[TopicPartition]:
        return [(topic, p) for topic, parts in self.owned.items() for p in parts]


@dataclass(slots=True)
class MemberAssignment:
    """One member's ConsumerProtocolAssignment: topic -> sorted partitions.

    Kafka's built-in assignors write no assignment user data, so ``user_data``
    stays None for all of them.
    """

    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None

    def topic_partitions(self) -> list[TopicPartition]:
        return [(topic, p) for topic, parts in self.partitions.items() for p in parts]


class Assignor(Protocol):
    """A partition assignor as the group leader (and every member) runs it.

    ``name`` is the protocol name members put in JoinGroup; ``protocol`` says
    whether members revoke everything before joining ("eager") or keep their
    partitions and only give up the ones the leader takes away ("cooperative").
    """

    name: str
    protocol: RebalanceProtocol

    def subscription_user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        """The user_data a member sends in its subscription, given what it owns and its generation."""
        ...

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
    ) -> dict[str, MemberAssignment]:
        """Every member's assignment (empty ones included), computed by the leader."""
        ...


def java_order(text: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does.

    Java compares UTF-16 code units; Python compares code points. They differ
    only when characters above U+FFFF meet characters in U+E000..U+FFFF, but a
    leader must order members exactly as a Java leader would to give the same
    assignment. Big-endian UTF-16 bytes compare like the code units.
    """
    return text.encode("utf-16-be", "surrogatepass")


def subscribed_partition_counts(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> dict[str, int]:
    """The topics to assign: subscribed by some member and with partitions.

    Kafka's AbstractPartitionAssignor builds exactly this map from metadata
    before calling an assignor; doing it here lets callers pass the whole
    metadata view.
    """
    subscribed = {topic for sub in subscriptions.values() for topic in sub.topics}
    return {topic: n for topic, n in partitions_per_topic.items() if topic in subscribed and n > 0}


def to_assignments(
    members: Iterable[str], partitions: Mapping[str, Iterable[TopicPartition]]
) -> dict[str, MemberAssignment]:
    """Group each member's partitions by topic, sorted; members with nothing get an empty assignment."""
    result: dict[str, MemberAssignment] = {}
    for member in members:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions.get(member, ())):
            by_topic.setdefault(topic, []).append(p)
        result[member] = MemberAssignment(by_topic)
    return result
