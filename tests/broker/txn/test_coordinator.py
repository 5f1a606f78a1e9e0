"""The transaction coordinator's state machine, without I/O: a fake clock and an in-memory log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.broker.txn.coordinator import PARK_MS
from tributary.broker.txn.messages import InitResult, SendMarkers
from tributary.broker.txn.records import decode_key, decode_value
from tributary.broker.txn.state import EPOCH_EXHAUSTED, TxnState
from tributary.protocol.error_codes import ErrorCode

from .harness import CONFIG, COORDINATOR_EPOCH, TIMEOUT_MS, Harness

TXN = "payments-1"
TP1, TP2 = ("payments", 0), ("payments", 3)


def started(h: Harness, transactional_id: str = TXN) -> InitResult:
    result = h.init(transactional_id)
    assert isinstance(result, InitResult) and result.error == ErrorCode.NONE, result
    assert h.add(transactional_id, result, TP1, TP2) == ErrorCode.NONE
    return result


def test_init_gives_the_id_its_next_epoch_and_writes_it() -> None:
    h = Harness()
    first = h.init(TXN)
    assert (first.error, first.producer_id, first.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    second = h.init(TXN)
    assert (second.error, second.producer_id, second.producer_epoch) == (ErrorCode.NONE, 1000, 1)
    stored = h.stored(TXN)
    assert stored is not None and (stored.producer_id, stored.producer_epoch, stored.state) == (1000, 1, TxnState.EMPTY)
    # The older epoch is fenced from now on.
    assert h.add(TXN, first, TP1) == ErrorCode.PRODUCER_FENCED
    assert h.end(TXN, first, commit=True) == ErrorCode.PRODUCER_FENCED


def test_a_transaction_commits_after_every_marker_is_written() -> None:
    h = Harness()
    producer = started(h)
    assert h.coordinator.describe(TXN).state == "Ongoing"
    assert h.end(TXN, producer, commit=True) == ErrorCode.NONE
    (markers,) = h.markers
    assert markers == SendMarkers(TXN, COORDINATOR_EPOCH, 1000, 0, True, frozenset({TP1, TP2}))
    assert h.stored(TXN).state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    # While markers are out, the next transaction's AddPartitionsToTxn waits for them (rather than
    # being answered CONCURRENT_TRANSACTIONS at once and retried after the client's backoff).
    assert h.add(TXN, producer, TP1) is None
    waiting = h.last_ticket
    assert h.init(TXN).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end(TXN, producer, commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end(TXN, producer, commit=False) == ErrorCode.INVALID_TXN_STATE
    h.apply(h.coordinator.marker_written(h.now, TXN, COORDINATOR_EPOCH, TP1))
    assert h.coordinator.describe(TXN).partitions == (TP2,)  # what still waits for its marker
    h.apply(h.coordinator.marker_written(h.now, TXN, COORDINATOR_EPOCH, TP2))
    assert h.stored(TXN).state is TxnState.ONGOING  # type: ignore[union-attr]
    assert h.replies[waiting] == ErrorCode.NONE  # the waiting request went on: the next transaction
    assert h.coordinator.describe(TXN).partitions == (TP1,)
    states = [decode_value(v).state for _, v in h.log[h.coordinator.partition_for(TXN)] if v is not None]
    assert states[-2:] == [TxnState.COMPLETE_COMMIT, TxnState.ONGOING]


def test_an_add_partitions_waits_only_so_long_for_the_last_transaction() -> None:
    h = Harness()
    producer = started(h)
    assert h.end(TXN, producer, commit=False) == ErrorCode.NONE
    assert h.add(TXN, producer, TP1) is None
    h.advance(PARK_MS - 1)
    assert h.last_ticket not in h.replies
    h.advance(1)
    assert h.replies[h.last_ticket] == ErrorCode.CONCURRENT_TRANSACTIONS  # the client retries
    h.deliver()
    assert h.end(TXN, producer, commit=False) == ErrorCode.NONE  # a retry of the finished EndTxn
    assert h.end(TXN, producer, commit=True) == ErrorCode.INVALID_TXN_STATE
    assert h.add(TXN, producer, TP1) == ErrorCode.NONE
    # A waiting request of an id whose partition moves away is told to find the new coordinator.
    assert h.end(TXN, producer, commit=True) == ErrorCode.NONE
    assert h.add(TXN, producer, TP2) is None
    h.apply(h.coordinator.unload(h.now, h.coordinator.partition_for(TXN)))
    assert h.replies[h.last_ticket] == ErrorCode.NOT_COORDINATOR


def test_end_without_a_transaction_is_an_invalid_state() -> None:
    h = Harness()
    producer = h.init(TXN)
    assert h.end(TXN, producer, commit=True) == ErrorCode.INVALID_TXN_STATE
    wrong_id = InitResult(ErrorCode.NONE, producer.producer_id + 1, producer.producer_epoch)
    assert h.add(TXN, wrong_id, TP1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add("unknown", producer, TP1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_new_instance_fences_the_open_transaction_and_aborts_it() -> None:
    h = Harness()
    zombie = started(h)
    # The new instance's first InitProducerId aborts the zombie's transaction with a bumped epoch.
    assert h.init(TXN).error == ErrorCode.CONCURRENT_TRANSACTIONS
    (markers,) = h.markers
    assert (markers.commit, markers.producer_epoch, markers.partitions) == (False, 1, frozenset({TP1, TP2}))
    assert h.end(TXN, zombie, commit=True) == ErrorCode.PRODUCER_FENCED
    assert h.init(TXN).error == ErrorCode.CONCURRENT_TRANSACTIONS  # still aborting
    h.deliver()
    assert h.stored(TXN).state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
    successor = h.init(TXN)
    assert (successor.error, successor.producer_epoch) == (ErrorCode.NONE, 2)


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    h = Harness()
    producer = started(h)
    h.advance(TIMEOUT_MS - CONFIG.abort_timed_out_interval_ms)
    assert not h.markers
    h.advance(2 * CONFIG.abort_timed_out_interval_ms)
    (markers,) = h.markers
    assert (markers.commit, markers.producer_epoch) == (False, producer.producer_epoch + 1)
    assert h.end(TXN, producer, commit=True) == ErrorCode.PRODUCER_FENCED
    h.deliver()
    assert h.coordinator.describe(TXN).state == "CompleteAbort"


def test_a_write_that_fails_changes_nothing() -> None:
    h = Harness()
    producer = h.init(TXN)
    h.write_error = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.add(TXN, producer, TP1) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.describe(TXN).state == "Empty"
    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.init(TXN).error == ErrorCode.NOT_COORDINATOR
    h.write_error = None
    assert h.add(TXN, producer, TP1) == ErrorCode.NONE


def test_a_failed_fence_keeps_the_bumped_epoch_and_does_not_bump_again() -> None:
    h = Harness()
    producer = started(h)
    h.write_error = ErrorCode.REQUEST_TIMED_OUT
    h.advance(TIMEOUT_MS + CONFIG.abort_timed_out_interval_ms)
    assert not h.markers
    assert h.end(TXN, producer, commit=True) == ErrorCode.PRODUCER_FENCED  # fenced in memory already
    h.write_error = None
    h.advance(CONFIG.abort_timed_out_interval_ms)
    (markers,) = h.markers
    assert markers.producer_epoch == producer.producer_epoch + 1


def test_a_write_outlived_by_the_leadership_is_not_applied() -> None:
    h = Harness()
    producer = h.init(TXN)
    partition = h.coordinator.partition_for(TXN)
    h.hold_writes = True
    ticket_result = h.add(TXN, producer, TP1)
    assert ticket_result is None  # waits for its write
    h.apply(h.coordinator.unload(h.now, partition))
    h.load(partition, COORDINATOR_EPOCH + 1)  # back, in a newer epoch, before the write finished
    h.release_writes()
    assert ErrorCode.NOT_COORDINATOR in h.replies.values()
    assert h.coordinator.describe(TXN).state == "Empty"


def test_requests_wait_while_the_partition_loads() -> None:
    h = Harness(load=False)
    assert h.init(TXN).error == ErrorCode.NOT_COORDINATOR
    partition = h.coordinator.partition_for(TXN)
    h.coordinator.begin_loading(partition, COORDINATOR_EPOCH)
    assert h.init(TXN).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.describe(TXN).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_a_coordinator_taking_over_finishes_a_decided_transaction() -> None:
    h = Harness()
    producer = started(h)
    assert h.end(TXN, producer, commit=True) == ErrorCode.NONE
    partition = h.coordinator.partition_for(TXN)
    h.markers.clear()  # this coordinator dies before any marker is written
    successor = Harness(load=False)
    successor.log = h.log
    successor.load(partition, COORDINATOR_EPOCH + 1)
    (markers,) = successor.markers
    assert markers == SendMarkers(TXN, COORDINATOR_EPOCH + 1, 1000, 0, True, frozenset({TP1, TP2}))
    successor.deliver()
    assert successor.stored(TXN).state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]


def test_an_open_transaction_survives_a_move_and_times_out_there() -> None:
    h = Harness()
    started(h)
    successor = Harness(load=False)
    successor.log = h.log
    successor.now = h.now
    successor.load(h.coordinator.partition_for(TXN), COORDINATOR_EPOCH + 1)
    assert successor.coordinator.describe(TXN).state == "Ongoing"
    successor.advance(TIMEOUT_MS + 2 * CONFIG.abort_timed_out_interval_ms)
    (markers,) = successor.markers
    assert not markers.commit


def test_kip_360_expected_epochs() -> None:
    h = Harness()
    first = h.init(TXN)
    bumped = h.init(TXN, expected=(first.producer_id, first.producer_epoch))
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 1)
    # A retry of that call (its answer lost) gets the same answer, not another bump.
    again = h.init(TXN, expected=(first.producer_id, first.producer_epoch))
    assert (again.error, again.producer_epoch) == (ErrorCode.NONE, 1)
    assert h.init(TXN, expected=(first.producer_id + 5, 0)).error == ErrorCode.PRODUCER_FENCED
    h.init(TXN)  # another instance: the epoch before it is no longer a retry
    assert h.init(TXN, expected=(first.producer_id, 0)).error == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_starts_a_new_producer_id() -> None:
    h = Harness()
    first = h.init(TXN)
    h.coordinator.txns[TXN].producer_epoch = EPOCH_EXHAUSTED
    rotated = h.init(TXN)
    assert (rotated.error, rotated.producer_epoch) == (ErrorCode.NONE, 0)
    assert rotated.producer_id != first.producer_id


def test_invalid_requests() -> None:
    h = Harness()
    assert h.init("").error == ErrorCode.INVALID_REQUEST
    assert h.init(TXN, timeout_ms=CONFIG.max_timeout_ms + 1).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(TXN, timeout_ms=0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.coordinator.describe("").error == ErrorCode.INVALID_REQUEST
    assert h.coordinator.describe("nobody").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    producer = started(h)
    assert h.end(TXN, producer, commit=False) == ErrorCode.NONE
    h.deliver()
    h.advance(CONFIG.transactional_id_expiration_ms + CONFIG.remove_expired_interval_ms)
    assert h.coordinator.describe(TXN).error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    partition = h.coordinator.partition_for(TXN)
    assert h.log[partition][-1][1] is None


def test_list_filters_by_state_producer_and_duration() -> None:
    h = Harness()
    started(h, "a")
    h.now += 5000
    b = h.init("b")
    error, listed, unknown = h.coordinator.list_transactions(h.now, [], [], -1)
    assert error == ErrorCode.NONE and {(t.transactional_id, t.state) for t in listed} == {
        ("a", "Ongoing"),
        ("b", "Empty"),
    }
    _, listed, unknown = h.coordinator.list_transactions(h.now, ["Ongoing", "Frozen"], [], -1)
    assert [t.transactional_id for t in listed] == ["a"] and unknown == ["Frozen"]
    _, listed, _ = h.coordinator.list_transactions(h.now, [], [b.producer_id], -1)
    assert [t.transactional_id for t in listed] == ["b"]
    _, listed, _ = h.coordinator.list_transactions(h.now, [], [], 4000)
    assert [t.transactional_id for t in listed] == ["a"]
    _, listed, _ = h.coordinator.list_transactions(h.now, [], [], 6000)
    assert listed == []


# --- what a coordinator taking over reads back ----------------------------------------------

IDS = ("x", "y")
OPS = st.lists(
    st.tuples(
        st.sampled_from(["init", "add", "commit", "abort", "markers", "tick", "fail", "heal", "move"]),
        st.sampled_from(IDS),
    ),
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_the_log_always_reproduces_what_was_acknowledged(ops: list[tuple[str, str]]) -> None:
    """Whatever the interleaving and whichever writes fail: a coordinator that loads the log has
    each id in the state the first coordinator applied; no transaction is decided both ways; and
    a producer's epoch never goes back."""
    h = Harness(CONFIG)
    producers: dict[str, InitResult] = {}
    epoch = COORDINATOR_EPOCH
    for op, txn in ops:
        producer = producers.get(txn)
        if op == "init":
            result = h.init(txn, timeout_ms=5000)
            if result is not None and result.error == ErrorCode.NONE:
                producers[txn] = result
        elif op == "add" and producer is not None:
            h.add(txn, producer, ("t", len(ops) % 3))
        elif op in ("commit", "abort") and producer is not None:
            h.end(txn, producer, commit=op == "commit")
        elif op == "markers":
            h.deliver()
        elif op == "tick":
            h.advance(3000)
        elif op == "fail":
            h.write_error = ErrorCode.NOT_ENOUGH_REPLICAS
        elif op == "heal":
            h.write_error = None
        elif op == "move":
            # The partition moves away and back: markers in flight are lost, the log is reloaded.
            epoch += 1
            h.markers.clear()
            for partition in range(CONFIG.state_log_partitions):
                h.apply(h.coordinator.unload(h.now, partition))
                h.load(partition, epoch)
        check_log(h)


def check_log(h: Harness) -> None:
    successor = Harness(CONFIG, load=False)
    successor.log = h.log
    for partition in range(CONFIG.state_log_partitions):
        successor.load(partition, COORDINATOR_EPOCH + 100)
    for txn, metadata in h.coordinator.txns.items():
        if metadata.producer_epoch < 0:
            continue  # created, never written
        loaded = successor.coordinator.txns[txn]
        assert loaded.producer_id == metadata.producer_id
        assert loaded.state is metadata.state
        bumped_in_memory = metadata.failed_epoch_fence or metadata.pending is not None
        assert loaded.producer_epoch == metadata.producer_epoch or bumped_in_memory
        if metadata.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            assert loaded.partitions == metadata.partitions
    for partition, records in h.log.items():
        decided: dict[str, TxnState] = {}
        epochs: dict[str, int] = {}
        for key, value in records:
            txn = decode_key(key)
            if value is None:
                continue
            stored = decode_value(value)
            assert stored.producer_epoch >= epochs.get(txn, -1), f"{txn}: epoch went back in {partition}"
            epochs[txn] = stored.producer_epoch
            before = decided.get(txn)
            if before is TxnState.PREPARE_COMMIT:
                assert stored.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT), "commit decided both ways"
            if before is TxnState.PREPARE_ABORT:
                assert stored.state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT), "abort decided both ways"
            decided[txn] = stored.state
