"""tributary.testing's history checker, on hand-made histories: it names what is missing,
duplicated or out of order, and nothing else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tributary.testing.history import History, sequence_of, sequence_value


def _history(acks: dict[int, tuple[int, int | None]], sent: int | None = None) -> History:
    history = History()
    for _ in range(sent if sent is not None else len(acks)):
        history.next_value()
    for sequence, (partition, offset) in acks.items():
        history.acknowledge(sequence, partition, offset)
    return history


def test_values_count_and_read_back() -> None:
    assert sequence_value(42) == b"0000000042"
    assert sequence_of(sequence_value(42)) == 42
    assert sequence_of(b"not a number") is None
    assert sequence_value(7, b"padding") == b"0000000007-padding"
    assert sequence_of(sequence_value(7, b"padding")) == 7
    assert sequence_of(b"00000000071") is None
    assert sequence_of(None) is None


def test_a_faithful_log_holds() -> None:
    history = _history({0: (0, 0), 1: (1, 0), 2: (0, 1)})
    verdict = history.check({0: [(0, sequence_value(0)), (1, sequence_value(2))], 1: [(0, sequence_value(1))]})
    assert verdict.ok
    assert (verdict.acknowledged, verdict.served) == (3, 3)
    assert str(verdict) == "every one of 3 acknowledged records served once, in order (3 served)"


def test_a_record_missing_or_served_at_another_offset_is_lost() -> None:
    history = _history({0: (0, 0), 1: (0, 1), 2: (0, 2)})
    verdict = history.check({0: [(0, sequence_value(0)), (1, sequence_value(2))]})
    assert verdict.lost == [(1, 0, 1), (2, 0, 2)]
    assert not verdict.ok
    assert str(verdict).startswith("2 acknowledged records missing, first [(1, 0, 1), (2, 0, 2)]")


def test_a_record_acknowledged_without_an_offset_must_be_served_in_its_partition() -> None:
    # librdkafka's idempotent producer reports a record persisted, offset unknown, when a later
    # record's acknowledgement implies it.
    history = _history({0: (0, None), 1: (0, 1), 2: (1, None)})
    verdict = history.check({0: [(0, sequence_value(0)), (1, sequence_value(1))], 1: [(0, sequence_value(5))]})
    assert verdict.lost == [(2, 1, None)]
    served_elsewhere = history.check({0: [(1, sequence_value(1)), (2, sequence_value(2))], 1: [(0, sequence_value(0))]})
    assert [s for s, _, _ in served_elsewhere.lost] == [0, 2]


def test_duplicates_and_reordering_are_named() -> None:
    history = _history({0: (0, 0), 1: (0, 1)}, sent=3)
    served = {0: [(0, sequence_value(0)), (1, sequence_value(1)), (2, sequence_value(0)), (3, sequence_value(2))]}
    verdict = history.check(served)
    assert verdict.lost == []
    assert verdict.duplicated == [(0, 2)]
    assert verdict.out_of_order == [(0, 2, 0, 1)]
    # Sequence 2 was sent but never acknowledged: allowed, and reported.
    assert verdict.unacknowledged_served == [2]
    assert "1 records served more than once" in str(verdict) and "1 records out of order" in str(verdict)


def test_failed_and_unanswered_records_are_counted() -> None:
    history = _history({0: (0, 0)}, sent=3)
    history.fail(1, "MessageTimedOut")
    assert history.unanswered == 1
    assert history.check({0: [(0, sequence_value(0))]}).ok


@given(st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=60))
def test_any_in_order_placement_over_partitions_holds(partitions: list[int]) -> None:
    # Records spread over partitions in send order, every one acknowledged where it landed.
    served: dict[int, list[tuple[int, bytes | None]]] = {}
    history = History()
    for partition in partitions:
        sequence, value = history.next_value()
        log = served.setdefault(partition, [])
        history.acknowledge(sequence, partition, len(log))
        log.append((len(log), value))
    verdict = history.check(served)
    assert verdict.ok, verdict
    assert verdict.served == verdict.acknowledged == len(partitions)
