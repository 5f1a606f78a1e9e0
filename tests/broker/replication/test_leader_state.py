"""The leader's ISR and high-watermark rules, without sockets or clocks (time is an argument)."""

from __future__ import annotations

from tributary.broker.replication.leader_state import UNKNOWN_OFFSET, LeaderState

LAG_MS = 10_000
ALL = frozenset({1, 2, 3})


def leader(isr: tuple[int, ...] = (1, 2, 3), *, leo: int = 0, hw: int = 0, now: int = 0) -> LeaderState:
    return LeaderState(1, (1, 2, 3), isr, 4, epoch_start_offset=leo, high_watermark=hw, now_ms=now)


def test_high_watermark_is_the_smallest_log_end_in_the_isr() -> None:
    state = leader()
    # Nothing is known of the followers yet: the high watermark stays where it was.
    assert not state.update_high_watermark(10)
    assert state.high_watermark == 0
    assert state.follower_fetched(2, 7, leader_leo=10, now_ms=1) is False  # 3 still unknown
    assert state.follower_fetched(3, 4, leader_leo=10, now_ms=1) is True
    assert state.high_watermark == 4
    assert state.follower_fetched(3, 10, leader_leo=10, now_ms=2) is True
    assert state.high_watermark == 7
    # It never moves back, whatever a follower reports later (it truncated, or a stale fetch).
    assert state.follower_fetched(2, 3, leader_leo=10, now_ms=3) is False
    assert state.high_watermark == 7


def test_a_replica_outside_the_isr_does_not_hold_the_high_watermark() -> None:
    state = leader(isr=(1, 2))
    state.follower_fetched(2, 5, leader_leo=5, now_ms=1)
    assert state.high_watermark == 5
    assert state.followers[3].log_end_offset == UNKNOWN_OFFSET


def test_a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time() -> None:
    state = leader(now=0)
    state.follower_fetched(2, 0, leader_leo=0, now_ms=0)
    state.follower_fetched(3, 0, leader_leo=0, now_ms=0)
    # 100 appended at t=1; follower 2 keeps up, follower 3 goes silent.
    state.follower_fetched(2, 100, leader_leo=100, now_ms=5_000)
    assert state.proposed_isr(100, 5_000, LAG_MS, ALL) is None
    assert state.proposed_isr(100, LAG_MS, LAG_MS, ALL) is None  # exactly the lag: still in
    assert state.proposed_isr(100, LAG_MS + 1, LAG_MS, ALL) == (1, 2)


def test_a_slow_but_steady_follower_counts_as_caught_up_at_its_previous_fetch() -> None:
    # Kafka's rule: reaching the leader's log end as of the previous fetch means caught up then.
    state = leader(now=0)
    state.follower_fetched(2, 0, leader_leo=0, now_ms=0)
    state.follower_fetched(3, 0, leader_leo=50, now_ms=8_000)  # behind: 50 arrived meanwhile
    state.follower_fetched(3, 50, leader_leo=90, now_ms=16_000)  # reached 50: caught up as of 8 000
    follower = state.followers[3]
    assert follower.last_caught_up_ms == 8_000
    assert follower.caught_up(90, 18_000, LAG_MS)
    assert not follower.caught_up(90, 18_001, LAG_MS)


def test_a_broker_that_left_the_cluster_is_dropped_at_once() -> None:
    state = leader()
    assert state.proposed_isr(0, 1, LAG_MS, frozenset({1, 2})) == (1, 2)


def test_a_follower_joins_once_it_reaches_the_high_watermark_and_this_epoch() -> None:
    state = leader(isr=(1, 2), leo=20, hw=10)
    state.follower_fetched(2, 20, leader_leo=20, now_ms=1)
    assert state.high_watermark == 20
    state.follower_fetched(3, 15, leader_leo=20, now_ms=1)
    assert state.proposed_isr(20, 1, LAG_MS, ALL) is None  # below the high watermark
    state.follower_fetched(3, 20, leader_leo=20, now_ms=2)
    assert state.proposed_isr(20, 2, LAG_MS, ALL) == (1, 2, 3)


def test_a_follower_below_the_epoch_start_does_not_join() -> None:
    # The leader took over at 30; a follower at the high watermark (25) lacks 25..30 of this leader.
    state = leader(isr=(1,), leo=30, hw=25)
    state.follower_fetched(2, 25, leader_leo=30, now_ms=1)
    assert state.proposed_isr(30, 1, LAG_MS, ALL) is None
    state.follower_fetched(2, 30, leader_leo=30, now_ms=2)
    assert state.proposed_isr(30, 2, LAG_MS, ALL) == (1, 2)


def test_while_an_expansion_is_written_the_new_member_already_holds_the_high_watermark() -> None:
    state = leader(isr=(1, 2), leo=10, hw=10)
    state.follower_fetched(2, 10, leader_leo=10, now_ms=1)
    state.follower_fetched(3, 10, leader_leo=10, now_ms=1)
    state.pending_isr = state.proposed_isr(10, 1, LAG_MS, ALL)
    assert state.pending_isr == (1, 2, 3)
    assert state.proposed_isr(10, 1, LAG_MS, ALL) is None  # one change at a time
    state.follower_fetched(2, 15, leader_leo=15, now_ms=2)
    assert not state.update_high_watermark(15)  # 3 is still at 10 and counts already
    state.isr_written((1, 2, 3))
    assert state.pending_isr is None and state.isr == (1, 2, 3)


def test_while_a_shrink_is_written_the_leaving_member_still_holds_the_high_watermark() -> None:
    state = leader(leo=10, hw=10)
    state.follower_fetched(2, 10, leader_leo=10, now_ms=0)
    state.follower_fetched(3, 10, leader_leo=10, now_ms=0)
    state.follower_fetched(2, 20, leader_leo=20, now_ms=LAG_MS + 1)
    state.pending_isr = state.proposed_isr(20, LAG_MS + 1, LAG_MS, ALL)
    assert state.pending_isr == (1, 2)
    assert not state.update_high_watermark(20)
    state.isr_written((1, 2))
    assert state.update_high_watermark(20) and state.high_watermark == 20


def test_lag_is_counted_from_the_leaders_log_end() -> None:
    state = leader(isr=(1, 2))
    state.follower_fetched(2, 7, leader_leo=10, now_ms=0)
    assert state.follower_lag(10) == {2: 3, 3: 10}


def test_under_high_watermark_fsync_the_leader_counts_only_what_it_fsynced() -> None:
    state = leader(isr=(1, 2))
    # The follower fetched at 50 (it fsyncs before fetching, so it holds 0..50 on disk); the
    # leader has 60 in its log but only 40 fsynced.
    assert state.follower_fetched(2, 50, leader_leo=60, now_ms=1, leader_durable=40)
    assert state.high_watermark == 40
    assert state.update_high_watermark(60)  # its group commit reached 60
    assert state.high_watermark == 50


def test_a_follower_whose_broker_registered_again_leaves_the_isr_until_it_catches_up() -> None:
    state = leader(now=0)
    state.follower_fetched(2, 100, leader_leo=100, now_ms=0)
    state.follower_fetched(3, 100, leader_leo=100, now_ms=0)
    assert state.proposed_isr(100, 10, LAG_MS, ALL, {1: 7, 2: 8, 3: 9}) is None  # registrations seen
    # Broker 3 restarted (a new registration) and fetches from where its log now ends: it was
    # caught up a moment ago, but what it held may be gone with its page cache.
    state.follower_fetched(3, 40, leader_leo=100, now_ms=20)
    assert state.proposed_isr(100, 30, LAG_MS, ALL, {1: 7, 2: 8, 3: 12}) == (1, 2)
    state.isr_written((1, 2))
    # Caught up again, it joins, and its new registration is the one remembered.
    state.follower_fetched(3, 100, leader_leo=100, now_ms=40)
    assert state.proposed_isr(100, 50, LAG_MS, ALL, {1: 7, 2: 8, 3: 12}) == (1, 2, 3)
    state.isr_written((1, 2, 3))
    assert state.proposed_isr(100, 60, LAG_MS, ALL, {1: 7, 2: 8, 3: 12}) is None
