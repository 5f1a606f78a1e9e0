"""Transactions in the log: open transactions hold the last stable offset back, markers close
them, aborted ones go into the segment's ``.txnindex``, and all of it survives restarts (clean or
not) and is reproduced by a follower copying the leader's bytes."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tributary.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.reads import READ_COMMITTED, READ_UNCOMMITTED
from tributary.broker.log.txn_index import AbortedTxn
from tributary.client.raw.batches import RawBatches
from tributary.protocol.records import ControlType, build_batch, build_marker_batch, iter_batches, iter_records

from .helpers import NOW, T0, crash, log_files, open_log, read_all

P1, P2, P3 = 1001, 1002, 1003


def txn_batch(producer_id: int, sequence: int, count: int = 2, *, epoch: int = 0, tag: int = 0) -> bytes:
    records = [(b"k", b"%d:%d:%d" % (producer_id, tag, i), (), T0 + i) for i in range(count)]
    return build_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
    )


def marker(log: PartitionLog, producer_id: int, kind: ControlType, *, epoch: int = 0, coordinator: int = 0) -> int:
    result = log.append_marker(
        kind, producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=coordinator, leader_epoch=0, now_ms=NOW
    )
    return result.base_offset


def committed_values(log: PartitionLog) -> list[bytes]:
    """What a read_committed consumer sees: up to the LSO, aborted transactions dropped."""
    end = log.visible_end_offset(READ_COMMITTED)
    with log.read(log.log_start_offset, 1 << 30, max_offset=end) as result:
        data = result.read_bytes()
    aborted = tuple((t.producer_id, t.first_offset) for t in log.aborted_transactions(log.log_start_offset, end))
    raw = RawBatches("t", 0, 0, data, tuple(iter_batches(data)), end, 0, end, aborted_transactions=aborted)
    out: list[bytes] = []
    for header, batch in raw.committed_batch_bytes():
        out += [r.value for r in iter_records(batch) if r.value is not None]
        assert not header.is_control
    return out


def test_an_open_transaction_holds_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([(b"k", b"plain", (), T0)]), 0, NOW)
    assert log.last_stable_offset == 1
    first = log.append(txn_batch(P1, 0), 0, NOW).base_offset
    log.append(txn_batch(P1, 2), 0, NOW)
    assert (first, log.log_end_offset, log.last_stable_offset) == (1, 5, 1)
    assert log.visible_end_offset(READ_UNCOMMITTED) == 5
    assert log.visible_end_offset(READ_COMMITTED) == 1
    assert marker(log, P1, ControlType.COMMIT) == 5
    assert log.last_stable_offset == log.log_end_offset == 6
    assert log.aborted_transactions(0, 6) == []
    assert committed_values(log) == [b"plain", b"1001:0:0", b"1001:0:1", b"1001:0:0", b"1001:0:1"]
    log.close()


def test_an_aborted_transaction_goes_into_the_segments_txnindex(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append(txn_batch(P1, 0, tag=1), 0, NOW)  # 0-1
    log.append(txn_batch(P2, 0, tag=2), 0, NOW)  # 2-3
    log.append(txn_batch(P1, 2, tag=1), 0, NOW)  # 4-5
    assert log.last_stable_offset == 0
    assert marker(log, P1, ControlType.ABORT) == 6
    # P2's transaction is still open from offset 2: the entry records it as the stable offset.
    assert log.aborted_transactions(0, 7) == [AbortedTxn(P1, 0, 6, 2)]
    assert log.last_stable_offset == 2
    assert marker(log, P2, ControlType.COMMIT) == 7
    assert log.last_stable_offset == 8
    assert log_files(path, ".txnindex") == ["00000000000000000000.txnindex"]
    # Kafka's layout: version int16, producerId, firstOffset, lastOffset, lastStableOffset.
    assert (path / "00000000000000000000.txnindex").read_bytes() == struct.pack(">hqqqq", 0, P1, 0, 6, 2)
    assert log.aborted_transactions(7, 8) == []  # the range starts after the abort marker
    assert log.aborted_transactions(0, 2) == [AbortedTxn(P1, 0, 6, 2)]
    assert committed_values(log) == [b"1002:2:0", b"1002:2:1"]
    log.close()


def test_what_a_transaction_may_not_do(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn_batch(P1, 0, epoch=3), 0, NOW)
    plain_idempotent = build_batch([(b"k", b"v", (), T0)], producer_id=P1, producer_epoch=3, base_sequence=2)
    with pytest.raises(InvalidTxnStateError):
        log.append(plain_idempotent, 0, NOW)
    with pytest.raises(InvalidTxnStateError):
        log.append(txn_batch(P1, 0, epoch=4), 0, NOW)  # a new epoch while epoch 3's transaction is open
    with pytest.raises(InvalidProducerEpochError):
        marker(log, P1, ControlType.COMMIT, epoch=2)
    # A coordinator that fenced the producer aborts with the bumped epoch (KIP-360); its
    # predecessor's markers are refused from then on.
    marker(log, P1, ControlType.ABORT, epoch=4, coordinator=5)
    with pytest.raises(InvalidProducerEpochError):
        log.append(txn_batch(P1, 2, epoch=3), 0, NOW)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, P1, ControlType.ABORT, epoch=4, coordinator=4)
    assert log.append(txn_batch(P1, 0, epoch=4), 0, NOW).base_offset == 3
    assert log.last_stable_offset == 3
    with pytest.raises(InvalidRecordError):  # clients never write control batches
        log.append(build_marker_batch(ControlType.COMMIT, P1, 4, 0, T0), 0, NOW)
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_an_open_transaction_and_the_index_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=300)
    log.append(txn_batch(P1, 0), 0, NOW)  # opens at 0, many segments before the end
    seq = 0
    for i in range(10):
        log.append(txn_batch(P2, seq, tag=i), 0, NOW)
        seq += 2
        if i % 3 == 2:
            marker(log, P2, ControlType.ABORT if i % 2 else ControlType.COMMIT)
    marker(log, P2, ControlType.COMMIT)
    assert len(log.segments) > 4
    aborted = log.aborted_transactions(0, log.log_end_offset)
    assert aborted and all(t.producer_id == P2 for t in aborted)
    end = log.log_end_offset
    recovery_point = log.segments[2].base_offset
    if clean:
        log.close()
    else:
        log.flush()
        crash(log)
        # What a crash after flushing everything but the last segments leaves: their index files
        # may be behind or ahead of the log; they are rebuilt from the markers.
        for name in log_files(path, ".txnindex"):
            (path / name).write_bytes(b"\x00" * 7)
    reopened = open_log(path, end if clean else recovery_point, clean=clean, segment_bytes=300)
    assert reopened.log_end_offset == end
    assert reopened.last_stable_offset == 0  # P1's transaction is still open
    if clean:
        assert reopened.aborted_transactions(0, end) == aborted
    else:
        # Segments past the recovery point were rebuilt; the damaged files before it are trusted
        # as they are (a crash cannot tear what was flushed), so only the rebuilt part compares.
        rebuilt = [t for t in aborted if t.last_offset >= recovery_point]
        assert [t for t in reopened.aborted_transactions(0, end) if t.last_offset >= recovery_point] == rebuilt
    marker(reopened, P1, ControlType.ABORT)
    assert reopened.last_stable_offset == reopened.log_end_offset
    assert AbortedTxn(P1, 0, end, end + 1) in reopened.aborted_transactions(0, end + 1)
    reopened.close()


def test_a_follower_copying_the_leaders_bytes_has_the_same_transactions(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0", segment_bytes=250)
    leader.append(txn_batch(P1, 0), 0, NOW)
    leader.append(txn_batch(P2, 0), 0, NOW)
    marker(leader, P1, ControlType.ABORT)
    leader.append(txn_batch(P1, 2), 0, NOW)
    marker(leader, P2, ControlType.COMMIT)
    follower = open_log(tmp_path / "follower-0", segment_bytes=250)
    follower.hw_follows_log_end = False
    follower.append_as_follower(read_all(leader), NOW)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.aborted_transactions(0, 100) == leader.aborted_transactions(0, 100)
    assert follower.producer_state.open_transactions() == leader.producer_state.open_transactions() == {P1: 5}
    # On the follower the high watermark trails: P2's transaction, closed by its marker at 7, is not
    # stable while the high watermark is below the marker.
    follower.high_watermark = 5
    assert follower.last_stable_offset == 2
    follower.high_watermark = follower.log_end_offset
    assert follower.last_stable_offset == 5
    leader.close()
    follower.close()


def test_a_closed_transaction_is_stable_only_once_its_marker_is_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.hw_follows_log_end = False
    log.append(txn_batch(P1, 0), 0, NOW)
    marker(log, P1, ControlType.COMMIT)
    log.high_watermark = 2  # the data is replicated, the marker not yet
    assert log.last_stable_offset == 0
    log.high_watermark = 3
    assert log.last_stable_offset == 3
    log.close()


def test_a_truncated_follower_forgets_markers_past_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=200)
    log.append(txn_batch(P1, 0), 0, NOW)
    cut = marker(log, P1, ControlType.ABORT)
    log.append(txn_batch(P2, 0), 0, NOW)
    assert log.aborted_transactions(0, 10) == [AbortedTxn(P1, 0, 2, 3)]
    log.truncate_to(cut)
    assert log.aborted_transactions(0, 10) == []
    assert log.producer_state.open_transactions() == {P1: 0}
    assert log.last_stable_offset == 0
    log.close()


# --- against a model ---------------------------------------------------------------------


@dataclass
class Model:
    """What every offset is: (producer id or None, transactional, kind) and each
    transaction's fate once decided."""

    log: list[tuple[int | None, str]] = field(default_factory=list)  # (producer, "data"/"plain"/"marker")
    open_txn: dict[int, int] = field(default_factory=dict)  # producer -> first offset
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # producer, first, marker offset
    values: dict[int, bytes] = field(default_factory=dict)  # offset -> value
    decided: dict[int, bool] = field(default_factory=dict)  # data offset -> committed

    def lso(self) -> int:
        return min(self.open_txn.values(), default=len(self.log))

    def committed(self) -> list[bytes]:
        lso = self.lso()
        out = []
        for offset in range(lso):
            _, kind = self.log[offset]
            if kind == "plain" or (kind == "data" and self.decided.get(offset, False)):
                out.append(self.values[offset])
        return out


OPS = st.lists(
    st.tuples(st.sampled_from(["data", "plain", "commit", "abort", "restart", "crash"]), st.sampled_from([P1, P2, P3])),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_last_stable_offset_and_aborted_index_agree_with_a_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    path = tmp_path_factory.mktemp("model") / "t-0"
    log = open_log(path, segment_bytes=220)
    model = Model()
    sequences: dict[int, int] = {}
    pending: dict[int, list[int]] = {}  # producer -> data offsets of its open transaction
    for n, (op, producer) in enumerate(ops):
        if op == "data":
            seq = sequences.get(producer, 0)
            value = b"%d:%d" % (producer, n)
            base = log.append(
                build_batch([(b"k", value, (), T0)], producer_id=producer, producer_epoch=0, base_sequence=seq,
                            is_transactional=True), 0, NOW,
            ).base_offset  # fmt: skip
            sequences[producer] = seq + 1
            model.log.append((producer, "data"))
            model.values[base] = value
            model.open_txn.setdefault(producer, base)
            pending.setdefault(producer, []).append(base)
        elif op == "plain":
            value = b"plain:%d" % n
            base = log.append(build_batch([(b"k", value, (), T0)]), 0, NOW).base_offset
            model.log.append((None, "plain"))
            model.values[base] = value
        elif op in ("commit", "abort"):
            kind = ControlType.COMMIT if op == "commit" else ControlType.ABORT
            offset = marker(log, producer, kind)
            first = model.open_txn.pop(producer, offset)
            for data in pending.pop(producer, []):
                model.decided[data] = op == "commit"
            if op == "abort":
                model.aborted.append((producer, first, offset))
            model.log.append((producer, "marker"))
        else:
            end = log.log_end_offset
            if op == "restart":
                log.close()
            else:
                crash(log)  # nothing flushed: every segment is recovered, every index rebuilt
            log = open_log(path, end if op == "restart" else 0, clean=op == "restart", segment_bytes=220)
        assert log.log_end_offset == len(model.log)
        assert log.last_stable_offset == model.lso()
    end = log.log_end_offset
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, end)] == model.aborted
    for start in range(0, end + 1, 3):
        for upper in range(start, end + 1, 4):
            expected = [t for t in model.aborted if t[2] >= start and t[1] < upper]
            got = [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(start, upper)]
            assert got == expected, (start, upper)
    assert committed_values(log) == model.committed()
    log.close()
