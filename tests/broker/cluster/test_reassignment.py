"""Partition reassignment's rules (broker.cluster.reassignment), sans-IO, and its znode formats."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tributary.broker.cluster.model import NO_LEADER
from tributary.broker.cluster.reassignment import Assignment, completed, invalid_target, moved_state, start
from tributary.broker.cluster.znodes import (
    LeaderAndIsr,
    decode_moving,
    decode_reassignment,
    decode_topic,
    encode_reassignment,
    encode_topic,
)

LIVE = {1, 2, 3, 4, 5}


def test_start_puts_the_target_first_and_records_what_moves() -> None:
    moving = start(Assignment((1, 2, 3)), (4, 2, 3))
    assert moving == Assignment((4, 2, 3, 1), adding=(4,), removing=(1,))
    assert (moving.original, moving.target, moving.moving) == ((2, 3, 1), (4, 2, 3), True)
    # A reorder moves no data: nothing to add or remove, and it completes at once.
    reordered = start(Assignment((1, 2, 3)), (3, 1, 2))
    assert reordered == Assignment((3, 1, 2)) and not reordered.moving


def test_a_new_target_replaces_the_move_under_way_and_cancel_returns_to_the_original() -> None:
    moving = start(Assignment((1, 2, 3)), (4, 5, 3))
    assert moving == Assignment((4, 5, 3, 1, 2), adding=(4, 5), removing=(1, 2))
    # The original replicas are still 1, 2, 3: a new target is measured against them.
    again = start(moving, (1, 2, 5))
    assert again == Assignment((1, 2, 5, 3), adding=(5,), removing=(3,))
    # Kafka's cancellation: the replica set less the ones being added, in that order.
    assert start(moving, None) == Assignment((3, 1, 2))
    assert start(Assignment((1, 2, 3)), None) == Assignment((1, 2, 3))


def test_completion_waits_for_every_target_replica_in_sync() -> None:
    moving = start(Assignment((1, 2, 3)), (4, 2, 3))
    assert completed(moving, isr=(1, 2, 3)) is None
    assert completed(moving, isr=(1, 2, 4)) is None
    assert completed(moving, isr=(1, 2, 3, 4)) == Assignment((4, 2, 3))
    assert completed(Assignment((1, 2, 3)), isr=(1, 2, 3)) is None  # nothing moving


def test_the_state_follows_the_assignment() -> None:
    state = LeaderAndIsr(leader=1, leader_epoch=7, isr=(1, 2, 3, 4), controller_epoch=2)
    # The leader is removed: a live in-sync target replica takes over, in replica order; the ISR
    # loses the removed replica; the epoch is bumped.
    done = moved_state(state, Assignment((4, 2, 3)), LIVE, controller_epoch=3)
    assert done == LeaderAndIsr(leader=4, leader_epoch=8, isr=(2, 3, 4), controller_epoch=3)
    # The leader stays when it is kept; the epoch still moves, so every replica learns the set.
    kept = moved_state(state, Assignment((2, 1, 4)), LIVE, controller_epoch=3)
    assert kept == LeaderAndIsr(leader=1, leader_epoch=8, isr=(1, 2, 4), controller_epoch=3)
    # Nobody alive and in sync among the assigned: wait.
    assert moved_state(state, Assignment((5,)), LIVE, controller_epoch=3) is None
    offline = LeaderAndIsr(leader=NO_LEADER, leader_epoch=7, isr=(2,), controller_epoch=2)
    assert moved_state(offline, Assignment((2, 5)), {5}, controller_epoch=3) is None


def test_targets_are_checked() -> None:
    assert invalid_target((), LIVE) == "the replica list is empty"
    assert invalid_target((1, 2, 1), LIVE) == "the replica list [1, 2, 1] repeats a broker"
    assert invalid_target((1, 9, 8), LIVE) == "brokers [8, 9] are not registered"
    assert invalid_target((5, 1), LIVE) is None


brokers = st.integers(1, 6)
replica_lists = st.lists(brokers, min_size=1, max_size=4, unique=True).map(tuple)


@given(original=replica_lists, targets=st.lists(st.one_of(st.none(), replica_lists), min_size=1, max_size=4))
def test_any_sequence_of_moves_keeps_the_original_and_ends_at_the_last_target(
    original: tuple[int, ...], targets: list[tuple[int, ...] | None]
) -> None:
    current = Assignment(original)
    last: tuple[int, ...] | None = None
    for target in targets:
        current = start(current, target)
        assert set(current.replicas) == set(current.original) | set(current.target)
        assert set(current.original) == set(original)
        assert len(set(current.replicas)) == len(current.replicas)
        last = target if target is not None else None
        if target is None:
            assert not current.moving
            original = current.replicas
    expected = original if last is None else last
    assert current.target == expected
    done = completed(current, isr=current.replicas) or current
    assert done == Assignment(expected)


def test_topic_nodes_carry_moves_in_kafkas_format() -> None:
    data = encode_topic("id", {0: (4, 2, 3, 1), 1: (1, 2)}, {0: ((4,), (1,))})
    value = json.loads(data)
    assert value["adding_replicas"] == {"0": [4]} and value["removing_replicas"] == {"0": [1]}
    assert decode_topic(data) == ("id", {0: (4, 2, 3, 1), 1: (1, 2)})
    assert decode_moving(data) == {0: ((4,), (1,))}
    assert decode_moving(encode_topic("id", {0: (1,)})) == {}
    # Only removing (a shrink), as Kafka may write it.
    assert decode_moving(b'{"version":3,"partitions":{"0":[1,2]},"removing_replicas":{"0":[2]}}') == {0: ((), (2,))}


def test_reassignment_requests_round_trip_with_cancellations() -> None:
    requested = {("a", 0): (4, 2, 3), ("a", 1): None, ("b", 2): (1,)}
    data = encode_reassignment(requested)
    assert json.loads(data)["partitions"][0] == {"topic": "a", "partition": 0, "replicas": [4, 2, 3]}
    assert decode_reassignment(data) == requested
    # What Kafka's own tools write is read as it is.
    kafka = b'{"version":1,"partitions":[{"topic":"t","partition":3,"replicas":[1,2],"log_dirs":["any","any"]}]}'
    assert decode_reassignment(kafka) == {("t", 3): (1, 2)}
    with pytest.raises(ValueError, match="partitions"):
        decode_reassignment(b'{"version":1}')
