from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tributary.broker.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.producer_snapshots import list_snapshots, snapshot_path
from tributary.broker.log.producer_state import ProducerStateManager
from tributary.protocol.compression import Compression
from tributary.protocol.crc32c import crc32c
from tributary.protocol.records import parse_batch_header

from .helpers import NOW, T0, batch, crash, open_log, read_all

PID = 4242


def _produce(log: PartitionLog, sequence: int, count: int = 2, epoch: int = 0, pid: int = PID) -> tuple[int, bool]:
    result = log.append(batch(count, producer_id=pid, epoch=epoch, sequence=sequence, tag=sequence), 0, NOW)
    return result.base_offset, result.duplicate


def test_a_retried_batch_gets_its_original_offsets_and_is_not_stored_again(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert _produce(log, 0) == (0, False)
    assert _produce(log, 2) == (2, False)
    size, end = log.size_in_bytes, log.log_end_offset
    retry = log.append(batch(2, producer_id=PID, epoch=0, sequence=0, tag=0, compression=Compression.ZSTD), 0, NOW)
    assert (retry.base_offset, retry.last_offset, retry.record_count, retry.duplicate) == (0, 1, 2, True)
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)
    log.close()


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(6):
        _produce(log, 2 * i)
    for i in range(1, 6):
        assert _produce(log, 2 * i) == (2 * i, True)
    with pytest.raises(OutOfOrderSequenceError):
        _produce(log, 0)
    log.close()


def test_sequences_must_follow_on(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        _produce(log, 3)  # 2 is missing
    with pytest.raises(OutOfOrderSequenceError):
        _produce(log, 1)  # overlaps the last batch without being it
    assert log.log_end_offset == 2
    assert _produce(log, 2) == (2, False)
    log.close()


def test_epochs_fence_and_restart_sequences(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        _produce(log, 2, epoch=2)
    with pytest.raises(OutOfOrderSequenceError):
        _produce(log, 5, epoch=4)  # a new epoch starts at 0
    assert _produce(log, 0, epoch=4) == (2, False)
    with pytest.raises(InvalidProducerEpochError):
        _produce(log, 2, epoch=3)
    log.close()


def test_an_unknown_producer_is_accepted_at_any_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert _produce(log, 1000) == (0, False)
    assert _produce(log, 1002) == (2, False)
    log.close()


def test_several_batches_of_one_producer_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    ok = batch(2, producer_id=PID, epoch=0, sequence=0) + batch(3, producer_id=PID, epoch=0, sequence=2)
    assert log.append(ok, 0, NOW).last_offset == 4
    gap = batch(1, producer_id=PID, epoch=0, sequence=5) + batch(1, producer_id=PID, epoch=0, sequence=7)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(gap, 0, NOW)
    assert log.log_end_offset == 5
    log.close()


def test_sequences_wrap_after_int32_max(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _produce(log, 2**31 - 2, count=2)  # sequences 2**31-2 and 2**31-1
    assert _produce(log, 0) == (2, False)
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_a_restart(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=400)
    for i in range(12):
        _produce(log, 2 * i)
        _produce(log, 2 * i, pid=PID + 1)
    assert len(log.segments) > 3
    # One snapshot per roll, at the new segment's base offset (Kafka's <offset>.snapshot).
    assert list_snapshots(path) == [s.base_offset for s in log.segments[1:]]
    end = log.log_end_offset
    if clean:
        log.close()
        assert snapshot_path(path, end).exists()
    else:
        crash(log)
    reopened = open_log(path, end, clean=clean, segment_bytes=400)
    assert _produce(reopened, 22) == (end - 4, True)
    assert _produce(reopened, 22, pid=PID + 1) == (end - 2, True)
    with pytest.raises(OutOfOrderSequenceError):
        _produce(reopened, 30)
    assert _produce(reopened, 24) == (end, False)
    reopened.close()


def test_a_damaged_snapshot_is_deleted_and_an_older_one_replayed(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=400)
    for i in range(12):
        _produce(log, 2 * i)
    end = log.log_end_offset
    log.close()
    snapshots = list_snapshots(path)
    assert snapshots[-1] == end
    newest = snapshot_path(path, end)
    newest.write_bytes(newest.read_bytes()[:-3])  # torn
    reopened = open_log(path, end, clean=True, segment_bytes=400)
    assert not newest.exists()
    assert _produce(reopened, 22) == (end - 2, True)  # replayed from the roll snapshot before it
    reopened.close()


def test_snapshots_past_the_log_end_are_deleted(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _produce(log, 0)
    log.close()  # snapshot at 2
    log = open_log(path, clean=True)
    _produce(log, 2)
    log.close()  # snapshot at 4
    log = open_log(path, clean=True)
    log.truncate_to(2)  # as a follower does
    assert list_snapshots(path) == [2]
    assert _produce(log, 2) == (2, False)
    log.close()


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", producer_id_expiration_ms=1000)
    _produce(log, 0)
    assert log.expire_producers(NOW + 999) == 0
    assert log.expire_producers(NOW + 1000) == 1
    assert _produce(log, 0) == (2, False)  # no longer known: appended again
    log.close()


def test_snapshot_round_trip_and_damage() -> None:
    state = ProducerStateManager()
    headers = []
    for i in range(8):
        data = batch(2, producer_id=i % 3, epoch=1, sequence=2 * (i // 3))
        headers.append(parse_batch_header(data)._replace(base_offset=10 * i))
    for header in headers:
        state.record(header, NOW)
    blob = state.to_bytes(99)
    offset, loaded = ProducerStateManager.from_bytes(blob, NOW)
    assert offset == 99
    assert {pid: (e.epoch, list(e.batches)) for pid, e in loaded} == {
        pid: (e.epoch, list(e.batches)) for pid, e in state
    }
    for damaged in (blob[:-1], blob[:6] + bytes([blob[6] ^ 1]) + blob[7:], b"", blob + b"\x00"):
        with pytest.raises(ValueError):
            ProducerStateManager.from_bytes(damaged, NOW)


def test_non_idempotent_batches_leave_no_state(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(2), 0, NOW)
    log.append(batch(2), 0, NOW)
    assert len(log.producer_state) == 0
    assert len(read_all(log)) == log.size_in_bytes
    log.close()
    assert os.path.getsize(snapshot_path(tmp_path / "t-0", 4)) > 0


def test_the_snapshot_of_a_broker_from_before_transactions_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _produce(log, 0)
    _produce(log, 2)
    log.close()
    for name in os.listdir(path):
        if name.endswith(".snapshot"):
            os.unlink(path / name)
    # What such a broker wrote at a clean close: version 1, producer id, epoch, its batches.
    body = struct.pack(">qi", 4, 1) + struct.pack(">qhb", PID, 0, 2)
    body += struct.pack(">iiqqq", 0, 1, 0, 1, T0) + struct.pack(">iiqqq", 2, 3, 2, 3, T0)
    legacy = path / "producer-state.snapshot"
    legacy.write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    reopened = open_log(path, 4, clean=True)
    assert not legacy.exists()  # a later crash must not read it
    assert _produce(reopened, 2) == (2, True)  # recognised from the old snapshot
    reopened.close()


def test_retention_deletes_the_snapshots_of_deleted_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=400, retention_bytes=400, retention_ms=-1)
    for i in range(12):
        _produce(log, 2 * i)
    before = list_snapshots(path)
    assert len(before) == 3  # one per roll
    assert log.delete_old_segments(NOW) > 0
    assert list_snapshots(path) == [offset for offset in before if offset >= log.log_start_offset]
    log.close()
