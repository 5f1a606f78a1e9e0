"""The auto-creation policy, sans-IO: deny pattern, partition cap, rate with a burst."""

from __future__ import annotations

import re

from tributary.broker.auto_create import AutoCreatePolicy
from tributary.protocol.error_codes import ErrorCode


def test_no_limits_allow_everything() -> None:
    policy = AutoCreatePolicy()
    assert all(policy.decide(f"t{i}", 3, 10**6, 0.0) is None for i in range(1000))


def test_denied_names_are_refused_with_policy_violation() -> None:
    policy = AutoCreatePolicy(deny=re.compile(r"^(test|tmp)[-_.]"))
    assert policy.decide("test-orders", 1, 0, 0.0) == ErrorCode.POLICY_VIOLATION
    assert policy.decide("tmp.x", 1, 0, 0.0) == ErrorCode.POLICY_VIOLATION
    assert policy.decide("orders-test", 1, 0, 0.0) is None


def test_the_cap_counts_the_new_topics_partitions() -> None:
    policy = AutoCreatePolicy(max_partitions=100)
    assert policy.decide("a", 3, 97, 0.0) is None
    assert policy.decide("b", 3, 98, 0.0) == ErrorCode.POLICY_VIOLATION


def test_the_rate_allows_a_burst_of_one_second_then_its_pace() -> None:
    policy = AutoCreatePolicy(max_per_second=5)
    answers = [policy.decide(f"t{i}", 1, 0, 0.0) for i in range(7)]
    assert answers == [None] * 5 + [ErrorCode.LEADER_NOT_AVAILABLE] * 2
    assert policy.decide("too-soon", 1, 0, 0.1) == ErrorCode.LEADER_NOT_AVAILABLE  # half a token back
    assert policy.decide("later", 1, 0, 0.2) is None  # a whole one
    assert policy.decide("again", 1, 0, 0.2) == ErrorCode.LEADER_NOT_AVAILABLE
    assert [policy.decide(f"u{i}", 1, 0, 10.0) for i in range(6)] == [None] * 5 + [ErrorCode.LEADER_NOT_AVAILABLE]
