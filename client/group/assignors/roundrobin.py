"""Kafka's RoundRobinAssignor ("roundrobin").

All partitions of all subscribed topics, sorted by (topic, partition), are
dealt to the members in MemberInfo order, cycling; a member not subscribed to a
partition's topic is skipped for that partition (and the cycle moves past it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tributary.client.group.assignors.model import (
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
    subscribed_partition_counts,
    to_assignments,
)
from tributary.client.group.assignors.range import member_info_order


class RoundRobinAssignor:
    name = "roundrobin"
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
        turn = 0
        # Topic names are ASCII (Kafka's legal characters), so Python's order is Java's.
        for topic in sorted(counts):
            for p in range(counts[topic]):
                # Terminates: every topic in ``counts`` has a subscriber.
                while topic not in topics_of[order[turn % len(order)]]:
                    turn += 1
                plan[order[turn % len(order)]].append((topic, p))
                turn += 1
        return to_assignments(subscriptions, plan)
