"""Kafka's StickyAssignor ("sticky") and CooperativeStickyAssignor ("cooperative-sticky").

Both run AbstractStickyAssignor: a balanced assignment that keeps as many of
each member's previously owned partitions as balance allows. They differ in
where a member's previous partitions come from and in what the leader hands
out:

* "sticky" is eager: members revoke everything before joining, so the leader
  reads what each owned, and in which generation, from its user_data
  (StickyAssignorUserData) and hands out the whole target assignment.
* "cooperative-sticky" members keep their partitions while rebalancing and
  report them in the subscription (OwnedPartitions, GenerationId). A partition
  that must move from one member to another is left out of this round's
  assignment: its owner sees it gone and revokes it, rejoins, and the
  follow-up rebalance gives it to its new member. So no partition ever has two
  owners at once.

Ownership claims are validated first: a claim on a partition that no longer
exists is dropped; when members claim the same partition, the claim of the
newest generation wins, and if two claims tie at the newest generation neither
member keeps the partition (Kafka's rule; for cooperative-sticky it is also
withheld this round, since both still hold it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tributary.client.group.assignors.model import (
    NO_GENERATION,
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
    java_order,
    subscribed_partition_counts,
    to_assignments,
)
from tributary.client.group.assignors.sticky_constrained import constrained_assign
from tributary.client.group.assignors.sticky_general import general_assign
from tributary.client.group.assignors.userdata import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member claims to own, and as of which generation (-1: unknown)."""

    partitions: Sequence[TopicPartition]
    generation: int


@dataclass(slots=True)
class Ownership:
    owned: dict[str, list[TopicPartition]]  # valid claims, disjoint
    claimants: dict[TopicPartition, list[str]]  # the members whose claim is of the newest generation
    prev_owner: dict[TopicPartition, str]  # owner in the newest generation before the current one


def resolve_ownership(counts: Mapping[str, int], members: Sequence[str], data: Mapping[str, MemberData]) -> Ownership:
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member in members:
        for tp in dict.fromkeys(data[member].partitions):  # a partition listed twice is one claim
            if 0 <= tp[1] < counts.get(tp[0], 0):
                claims.setdefault(tp, []).append((data[member].generation, member))

    claimants: dict[TopicPartition, list[str]] = {}
    for tp, tp_claims in claims.items():
        newest = max(gen for gen, _ in tp_claims)
        claimants[tp] = [m for gen, m in tp_claims if gen == newest]

    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for member in members:
        for tp in dict.fromkeys(data[member].partitions):
            if claimants.get(tp) == [member]:
                owned[member].append(tp)

    # Kafka's prevAssignment: claims from generations older than the group's
    # newest, the newest of those per partition (the first member on a tie).
    max_generation = max((data[m].generation for m in members), default=NO_GENERATION)
    prev: dict[TopicPartition, tuple[int, str]] = {}
    for member in members:
        generation = data[member].generation
        if generation >= max_generation:
            continue
        for tp in data[member].partitions:
            if tp not in prev or generation > prev[tp][0]:
                prev[tp] = (generation, member)
    return Ownership(owned, claimants, {tp: m for tp, (_, m) in prev.items()})


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, MemberSubscription],
    data: Mapping[str, MemberData],
) -> tuple[dict[str, list[TopicPartition]], Ownership]:
    """The sticky target assignment, and the validated ownership it started from."""
    counts = subscribed_partition_counts(partitions_per_topic, subscriptions)
    members = sorted(subscriptions, key=java_order)
    ownership = resolve_ownership(counts, members, data)
    if not members:
        return {}, ownership
    topics_of = {m: frozenset(subscriptions[m].topics) for m in members}
    if len(set(topics_of.values())) == 1:
        return constrained_assign(counts, members, ownership.owned), ownership
    return general_assign(counts, topics_of, ownership.owned, ownership.prev_owner), ownership


class StickyAssignor:
    name = "sticky"
    protocol: RebalanceProtocol = "eager"

    def subscription_user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        # Kafka sends no user data until the member has had an assignment.
        if generation == NO_GENERATION and not any(owned.values()):
            return None
        return encode_sticky_user_data(owned, generation)

    def member_data(self, sub: MemberSubscription) -> MemberData:
        # Eager members revoked everything before joining: only user_data says what they had.
        partitions, generation = decode_sticky_user_data(sub.user_data)
        return MemberData(partitions, generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
    ) -> dict[str, MemberAssignment]:
        data = {m: self.member_data(sub) for m, sub in subscriptions.items()}
        plan, _ = sticky_assign(partitions_per_topic, subscriptions, data)
        return to_assignments(subscriptions, plan)


class CooperativeStickyAssignor:
    name = "cooperative-sticky"
    protocol: RebalanceProtocol = "cooperative"

    def subscription_user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        return encode_cooperative_user_data(generation)

    def member_data(self, sub: MemberSubscription) -> MemberData:
        # Subscription v2+ carries the generation; older ones only in user_data.
        generation = sub.generation if sub.generation >= 0 else decode_cooperative_user_data(sub.user_data)
        return MemberData(sub.owned_partitions(), generation)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
    ) -> dict[str, MemberAssignment]:
        data = {m: self.member_data(sub) for m, sub in subscriptions.items()}
        plan, ownership = sticky_assign(partitions_per_topic, subscriptions, data)
        return to_assignments(subscriptions, withhold_transfers(plan, ownership.claimants))


def withhold_transfers(
    plan: Mapping[str, Sequence[TopicPartition]], claimants: Mapping[TopicPartition, Sequence[str]]
) -> dict[str, list[TopicPartition]]:
    """Drop from each member's target the partitions another member still validly owns.

    Kafka computes the same set (partitionsTransferringOwnership) as the
    assignment is built; deriving it from the claims afterwards covers both of
    Kafka's paths alike, including partitions two members claim at once.
    """
    return {
        member: [tp for tp in tps if all(c == member for c in claimants.get(tp, ()))] for member, tps in plan.items()
    }
