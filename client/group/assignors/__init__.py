"""Kafka's consumer partition assignors, as the group leader runs them.

Pure functions of their inputs: no I/O, no trio, no state between calls (what
Kafka's assignors remember between rebalances, a member's owned partitions and
generation, the caller passes in).

Interface
---------
``ASSIGNORS`` maps Kafka's protocol names ("range", "roundrobin", "sticky",
"cooperative-sticky") to an :class:`Assignor`:

* ``name``: the protocol name a member lists in JoinGroup (in preference order).
* ``protocol``: "eager" (members revoke all partitions before rejoining) or
  "cooperative" (members keep them; only partitions missing from their new
  assignment are revoked, after which they rejoin for a follow-up rebalance).
* ``subscription_user_data(owned, generation)``: the ``user_data`` a member
  puts in its ConsumerProtocolSubscription, given the partitions it was last
  assigned (topic -> partitions) and that assignment's generation (-1 before
  its first). "sticky" writes StickyAssignorUserData v1 (None before its first
  assignment, as Kafka does); "cooperative-sticky" writes its generation as an
  int32 (the leader reads the subscription's owned_partitions and
  generation_id, v1+/v2+, and falls back to it); the others write None.
* ``assign(partitions_per_topic, subscriptions)``: run by the leader on the
  JoinGroup members (member id -> :class:`MemberSubscription`) with each
  topic's partition count from metadata (topics nobody subscribes to are
  ignored). Returns every member's :class:`MemberAssignment`, empty ones too.

Member side: to join, build metadata with :func:`subscription_metadata`
(topics, ``user_data=assignor.subscription_user_data(owned, generation)``,
and for cooperative-sticky ``owned=`` and ``generation=`` too). Leader side:
turn each JoinGroupResponse member into a :class:`MemberSubscription` with
:func:`member_subscription`, call ``assign``, and encode each result for
SyncGroup with :func:`assignment_bytes`; every member reads its own with
:func:`member_assignment`. Lower level: ``encode_/decode_subscription`` and
``encode_/decode_assignment`` frame the protocol structs with Kafka's int16
version prefix.
"""

from __future__ import annotations

from tributary.client.group.assignors.model import (
    NO_GENERATION,
    Assignor,
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
    TopicPartition,
)
from tributary.client.group.assignors.range import RangeAssignor
from tributary.client.group.assignors.roundrobin import RoundRobinAssignor
from tributary.client.group.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from tributary.client.group.assignors.userdata import (
    StickyAssignorUserData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from tributary.client.group.assignors.wire import (
    CONSUMER_PROTOCOL_VERSION,
    assignment_bytes,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    member_assignment,
    member_subscription,
    subscription_metadata,
)

ASSIGNORS: dict[str, Assignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
}

__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_VERSION",
    "NO_GENERATION",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "StickyAssignorUserData",
    "TopicPartition",
    "assignment_bytes",
    "decode_assignment",
    "decode_cooperative_user_data",
    "decode_subscription",
    "decode_sticky_user_data",
    "encode_assignment",
    "encode_cooperative_user_data",
    "encode_subscription",
    "encode_sticky_user_data",
    "member_assignment",
    "member_subscription",
    "subscription_metadata",
]
