"""Kafka's RangeAssignor ("range").

Per topic, the subscribed members in MemberInfo order (static members first by
group.instance.id, then dynamic ones by member id) take contiguous ranges of
the partitions; the first ``partitions % members`` of them take one extra.
Static members therefore keep their ranges when their member id changes.

Kafka's rack-aware variant needs replica racks, which an assignment from
partition counts does not have (Kafka's own ``assign(Map<String, Integer>)``
drops them too), so it never applies here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tributary.client.group.assignors.model import (
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
    java_order,
    subscribed_partition_counts,
    to_assignments,
)


def member_info_key(member_id: str, sub: MemberSubscription) -> tuple[int, bytes, bytes]:
    """Kafka's AbstractPartitionAssignor.MemberInfo order: static members first, by instance id."""
    if sub.group_instance_id is not None:
        return (0, java_order(sub.group_instance_id), java_order(member_id))
    return (1, b"", java_order(member_id))


def member_info_order(subscriptions: Mapping[str, MemberSubscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_info_key(m, subscriptions[m]))


class RangeAssignor:
    name = "range"
    protocol: RebalanceProtocol = "eager"

    def subscription_user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        return None

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
    ) -> dict[str, MemberAssignment]:
        counts = subscribed_partition_counts(partitions_per_topic, subscriptions)
        order = member_info_order(subscriptions)
        topics_of = {m: set(sub.topics) for m, sub in subscriptions.items()}
        plan: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic, n in counts.items():
            members = [m for m in order if topic in topics_of[m]]
            per_member, extra = divmod(n, len(members))
            start = 0
            for i, member in enumerate(members):
                length = per_member + (1 if i < extra else 0)
                plan[member].extend((topic, p) for p in range(start, start + length))
                start += length
        return to_assignments(subscriptions, plan)
