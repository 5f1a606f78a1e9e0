"""Offsets committed inside a transaction (TxnOffsetCommit): invisible until the transaction's
commit marker reaches the group's partition, dropped by an abort, and rebuilt either way by a
coordinator that loads the partition."""

from __future__ import annotations

from tributary.protocol.error_codes import ErrorCode

from .harness import Harness

TP = ("orders", 0)
PID, OTHER = 4001, 4002


def test_offsets_count_from_the_commit_marker() -> None:
    h = Harness()
    assert h.commit_errors(h.txn_commit({TP: 10}, PID)) == {TP: ErrorCode.NONE}
    assert h.committed(TP) is None
    h.mark(PID, commit=True)
    assert h.committed(TP) == 10


def test_an_abort_drops_them() -> None:
    h = Harness()
    h.commit_errors(h.commit({TP: 5}))
    h.txn_commit({TP: 10}, PID)
    h.mark(PID, commit=False)
    assert h.committed(TP) == 5
    h.mark(PID, commit=True)  # a marker repeated by a new coordinator: nothing left to apply
    assert h.committed(TP) == 5


def test_a_plain_commit_written_after_them_wins() -> None:
    h = Harness()
    h.txn_commit({TP: 10}, PID)
    h.commit({TP: 20})
    h.mark(PID, commit=True)
    assert h.committed(TP) == 20
    # ...and one written before them loses.
    h.commit({TP: 30})
    h.txn_commit({TP: 40}, OTHER)
    h.mark(OTHER, commit=True)
    assert h.committed(TP) == 40


def test_a_reloaded_partition_keeps_open_transactions_pending() -> None:
    h = Harness()
    partition = h.coordinator.partition_for("g")
    h.txn_commit({TP: 10}, PID)
    h.txn_commit({("orders", 1): 7}, OTHER)
    h.mark(OTHER, commit=True)
    h.commit({("orders", 2): 3})
    h.apply(h.coordinator.unload(h.now, partition))
    h.load(partition)
    assert (h.committed(TP), h.committed(("orders", 1)), h.committed(("orders", 2))) == (None, 7, 3)
    h.mark(PID, commit=True)
    assert h.committed(TP) == 10
    # And read back from the log with the marker in it.
    h.apply(h.coordinator.unload(h.now, partition))
    h.load(partition)
    assert h.committed(TP) == 10


def test_the_member_and_generation_are_checked_when_given() -> None:
    h = Harness()
    (member,), generation = h.form_group(1)
    ok = h.txn_commit({TP: 1}, PID, member_id=member, generation=generation)
    assert h.commit_errors(ok) == {TP: ErrorCode.NONE}
    stale = h.txn_commit({TP: 2}, PID, member_id=member, generation=generation - 1)
    assert h.commit_errors(stale) == {TP: ErrorCode.ILLEGAL_GENERATION}
    stranger = h.txn_commit({TP: 2}, PID, member_id="nobody", generation=generation)
    assert h.commit_errors(stranger) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    # Without them (TxnOffsetCommit before v3) nothing is checked.
    assert h.commit_errors(h.txn_commit({TP: 3}, PID)) == {TP: ErrorCode.NONE}


def test_an_unknown_group_is_created_and_a_failed_write_leaves_nothing_pending() -> None:
    h = Harness()
    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.commit_errors(h.txn_commit({TP: 10}, PID, group="new")) == {TP: ErrorCode.NOT_COORDINATOR}
    h.write_error = None
    h.mark(PID, commit=True, group="new")
    assert h.committed(TP, group="new") is None
    assert h.coordinator.describe("new").state == "Empty"


def test_a_marker_written_while_the_partition_loads_is_applied_once_loaded() -> None:
    h = Harness()
    partition = h.coordinator.partition_for("g")
    h.txn_commit({TP: 10}, PID)
    h.apply(h.coordinator.unload(h.now, partition))
    before_marker = list(h.log[partition])  # what the load reads: the marker is not in it yet
    token = h.coordinator.begin_loading(partition)
    h.apply(h.coordinator.complete_txn(h.now, partition, PID, True))  # WriteTxnMarkers meanwhile
    h.apply(h.coordinator.finish_loading(h.now, partition, token, before_marker))
    assert h.committed(TP) == 10
