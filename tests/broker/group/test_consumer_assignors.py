"""The server assignors of consumer groups: ``uniform`` (balanced, complete, sticky) and
``range`` (Kafka's ranges, co-partitioned)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.broker.group.consumer_assignors import Assignment, MemberSpec, range_, uniform

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def flat(result: dict[str, Assignment]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def counts(result: dict[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def test_range_gives_contiguous_ranges_the_first_members_one_more() -> None:
    members = {m: MemberSpec(frozenset({A, B})) for m in ("m3", "m1", "m2")}
    result = range_(members, {A: 8, B: 3})
    assert result["m1"] == {A: frozenset({0, 1, 2}), B: frozenset({0})}
    assert result["m2"] == {A: frozenset({3, 4, 5}), B: frozenset({1})}
    assert result["m3"] == {A: frozenset({6, 7}), B: frozenset({2})}


def test_range_puts_static_members_first() -> None:
    members = {"a": MemberSpec(frozenset({A})), "z": MemberSpec(frozenset({A}), instance_id="i")}
    assert range_(members, {A: 2})["z"] == {A: frozenset({0})}


def test_uniform_with_one_subscription_balances_to_one() -> None:
    members = {f"m{i}": MemberSpec(frozenset({A, B})) for i in range(3)}
    result = uniform(members, {A: 16, B: 4})
    assert sorted(counts(result).values()) == [6, 7, 7]
    assert flat(result) == sorted([(A, p) for p in range(16)] + [(B, p) for p in range(4)])


def test_uniform_is_sticky_when_a_member_joins() -> None:
    first = uniform({"m1": MemberSpec(frozenset({A})), "m2": MemberSpec(frozenset({A}))}, {A: 16})
    members = {m: MemberSpec(frozenset({A}), current=first[m]) for m in first}
    members["m3"] = MemberSpec(frozenset({A}))
    second = uniform(members, {A: 16})
    for m in ("m1", "m2"):
        assert second[m][A] <= first[m][A]
    assert sorted(counts(second).values()) == [5, 5, 6]


def test_uniform_heterogeneous_only_gives_subscribed_topics() -> None:
    members = {"a": MemberSpec(frozenset({A})), "b": MemberSpec(frozenset({A, B})), "c": MemberSpec(frozenset({C}))}
    result = uniform(members, {A: 4, B: 4, C: 2})
    assert set(result["a"]) <= {A}
    assert set(result["c"]) == {C}
    assert counts(result)["a"] == counts(result)["b"] == 4


topic_ids = st.sampled_from([A, B, C])


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    topics = draw(st.dictionaries(topic_ids, st.integers(0, 12), min_size=1))
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True))
    homogeneous = draw(st.booleans())
    subscription = frozenset(draw(st.sets(topic_ids, min_size=1)))
    members = {}
    for name in names:
        subscribed = subscription if homogeneous else frozenset(draw(st.sets(topic_ids, min_size=1)))
        # A stale previous assignment: arbitrary partitions, some no longer valid, some shared.
        current = {t: frozenset(draw(st.sets(st.integers(0, 14), max_size=5))) for t in draw(st.sets(topic_ids))}
        members[name] = MemberSpec(subscribed, current={t: ps for t, ps in current.items() if ps})
    return members, topics


@settings(max_examples=150)
@given(groups())
def test_uniform_assigns_every_partition_once_to_a_subscriber_and_balances(
    case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, topics = case
    result = uniform(members, topics)
    assert set(result) == set(members)
    owned = flat(result)
    assert len(owned) == len(set(owned)), "a partition given twice"
    subscribed = {t for spec in members.values() for t in spec.topics}
    assert set(owned) == {(t, p) for t, n in topics.items() if t in subscribed for p in range(n)}
    for member, assignment in result.items():
        assert set(assignment) <= members[member].topics
    # No partition could move to a member holding two fewer (the balance uniform promises).
    count = counts(result)
    for member, assignment in result.items():
        for topic in assignment:
            for other, spec in members.items():
                assert not (topic in spec.topics and count[member] - count[other] >= 2), (member, other, result)


@settings(max_examples=100)
@given(groups())
def test_uniform_keeps_what_balance_allows(case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]) -> None:
    """Re-running on its own result moves nothing: the assignment is a fixed point."""
    members, topics = case
    first = uniform(members, topics)
    again = uniform({m: MemberSpec(s.topics, current=first[m]) for m, s in members.items()}, topics)
    assert again == first


@settings(max_examples=100)
@given(groups())
def test_range_assigns_every_subscribed_partition_once(
    case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, topics = case
    result = range_(members, topics)
    owned = flat(result)
    assert len(owned) == len(set(owned))
    subscribed = {t for spec in members.values() for t in spec.topics}
    assert set(owned) == {(t, p) for t, n in topics.items() if t in subscribed for p in range(n)}
