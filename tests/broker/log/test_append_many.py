"""PartitionLog.append_many (a connection's pipelined Produce requests to one partition, written
together) against one append per part: the same outcome for each part, the same files."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tributary.broker.log import segment as segment_module
from tributary.broker.log.errors import OutOfOrderSequenceError, StorageError
from tributary.broker.log.log import AppendResult, PartitionLog
from tributary.protocol.errors import CorruptRecordError

from .helpers import NOW, T0, batch, open_log, read_all

PID = 4242

#: One part: (kind, records, timestamp step, sequence offset). Kinds: a plain batch, one whose
#: CRC is wrong, an idempotent producer's (its sequence shifted from the next one expected: 0
#: follows on, a negative one retries an earlier batch, a positive one leaves a gap).
_PART = st.tuples(
    st.sampled_from(["plain", "plain", "corrupt", "producer"]),
    st.integers(1, 4),
    st.sampled_from([0, 0, 1, 700]),  # a step past segment.ms rolls on record time
    st.sampled_from([0, 0, 0, -1, -2, 1]),
)


def _parts(spec: list[tuple[str, int, int, int]]) -> list[bytes]:
    parts, timestamp, sequence = [], T0, 0
    for tag, (kind, count, step, shift) in enumerate(spec):
        timestamp += step
        if kind == "producer":
            first = max(sequence + shift * count, 0)
            parts.append(batch(count, timestamp=timestamp, producer_id=PID, epoch=0, sequence=first, tag=tag))
            sequence = max(sequence, first + count)
        else:
            data = bytearray(batch(count, timestamp=timestamp, tag=tag))
            if kind == "corrupt":
                data[-1] ^= 0xFF
            parts.append(bytes(data))
    return parts


def _outcome(result: object) -> object:
    return result if isinstance(result, AppendResult) else (type(result).__name__, str(result))


def _one_by_one(log: PartitionLog, parts: list[bytes]) -> list[object]:
    outcomes: list[object] = []
    for part in parts:
        try:
            outcomes.append(log.append(part, 3, NOW))
        except Exception as exc:  # each part's outcome is compared, whatever it is
            outcomes.append(exc)
    return [_outcome(o) for o in outcomes]


def _producers(log: PartitionLog) -> dict[int, tuple[object, ...]]:
    return {
        pid: (e.epoch, list(e.batches), e.last_offset, e.current_txn_first_offset, e.last_append_ms)
        for pid, e in log.producer_state
    }


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(_PART, min_size=1, max_size=14), groups=st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_append_many_answers_and_writes_what_one_append_per_part_does(
    spec: list[tuple[str, int, int, int]], groups: list[int]
) -> None:
    parts = _parts(spec)
    config = {"segment_bytes": 400, "segment_ms": 1000, "index_interval_bytes": 64}
    with tempfile.TemporaryDirectory() as tmp:
        alone = open_log(Path(tmp) / "alone-0", **config)
        together = open_log(Path(tmp) / "together-0", **config)
        expected = _one_by_one(alone, parts)
        got: list[object] = []
        start, g = 0, 0
        while start < len(parts):  # the parts in runs of varied lengths, as requests arrive
            size = groups[g % len(groups)]
            got += [_outcome(o) for o in together.append_many(parts[start : start + size], 3, NOW)]
            start += size
            g += 1
        assert got == expected
        assert read_all(together) == read_all(alone)
        assert [(s.base_offset, s.size) for s in together.segments] == [(s.base_offset, s.size) for s in alone.segments]
        assert _producers(together) == _producers(alone)
        alone.close()
        together.close()
        assert _files(Path(tmp) / "together-0") == _files(Path(tmp) / "alone-0")


def test_a_refused_part_leaves_the_others_appended_one_after_another(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    bad = bytearray(batch(1, tag=1))
    bad[-1] ^= 0xFF
    outcomes = log.append_many([batch(2, tag=0), bytes(bad), batch(3, tag=2)], 0, NOW)
    assert [(o.base_offset, o.last_offset, o.record_count) for o in outcomes if isinstance(o, AppendResult)] == [
        (0, 1, 2),
        (2, 4, 3),
    ]
    assert isinstance(outcomes[1], CorruptRecordError)
    assert outcomes[1].__traceback__ is None  # kept without the frames of the check
    assert log.log_end_offset == 5
    log.close()


def test_a_retry_and_a_gap_among_the_parts_are_answered_as_separate_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = batch(2, producer_id=PID, epoch=0, sequence=0, tag=0)
    outcomes = log.append_many(
        [first, first, batch(1, producer_id=PID, epoch=0, sequence=5, tag=1), batch(1, tag=2)], 0, NOW
    )
    assert outcomes[0] == AppendResult(0, 1, -1, 2, 0)
    assert outcomes[1] == AppendResult(0, 1, -1, 2, 0, duplicate=True)
    assert isinstance(outcomes[2], OutOfOrderSequenceError)
    assert outcomes[3] == AppendResult(2, 2, -1, 1, 0)
    log.close()


def test_a_failed_write_fails_its_parts_and_the_ones_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(1, tag=0), 0, NOW)

    def disk_full(fd: int, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module, "write_all", disk_full)
    outcomes = log.append_many([batch(1, tag=1), batch(1, tag=2)], 0, NOW)
    assert [type(o) for o in outcomes] == [StorageError, StorageError]
    assert log.log_end_offset == 1
    monkeypatch.undo()
    assert log.append_many([batch(1, tag=3)], 0, NOW) == [AppendResult(1, 1, -1, 1, 0)]
    log.close()
