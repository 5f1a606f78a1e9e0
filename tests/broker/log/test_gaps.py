"""Offset gaps a segment may legitimately have (a follower copying a cleaned leader, a cleaned
segment) are written down in its gaps file; recovery and the scrubber accept exactly those and
still take any other jump of a baseOffset (outside the CRC) for damage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.gaps import decode_gaps
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import TopicPartition
from tributary.broker.log.scrubber import Scrubber
from tributary.protocol.records import iter_batches, set_base_offset

from .helpers import NOW, batch, crash, open_log, read_all, values

# Batches of 3 records copied from a leader whose cleaner emptied the offsets between them.
BASES = [0, 3, 10, 13, 40, 43, 44, 100]


def _leader_batches() -> bytes:
    out = bytearray()
    for i, base in enumerate(BASES):
        data = bytearray(batch(3 if base != 43 else 1, tag=i))
        set_base_offset(data, 0, base)
        out += data
    return bytes(out)


def _follower(path: Path, segment_bytes: int = 500) -> PartitionLog:
    follower = open_log(path, segment_bytes=segment_bytes, index_interval_bytes=100)
    data = _leader_batches()
    # In two fetches, the second starting after a gap.
    cut = next(pos for pos, h in iter_batches(data) if h.base_offset == 40)
    follower.append_as_follower(data[:cut], NOW)
    follower.append_as_follower(data[cut:], NOW)
    return follower


def _gaps(path: Path) -> dict[int, dict[int, int]]:
    return {int(f.name[:20]): decode_gaps(f.read_bytes()) for f in sorted(path.glob("*.gaps"))}


def test_a_follower_writes_down_each_gap_and_recovery_accepts_them(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    follower = _follower(path)
    served = values(read_all(follower))
    assert [offset for offset, _ in served][:7] == [0, 1, 2, 3, 4, 5, 10]
    assert follower.log_end_offset == 103
    recorded = {e: a for gaps in _gaps(path).values() for e, a in gaps.items()}
    assert recorded == {6: 10, 16: 40, 47: 100}
    crash(follower)  # every segment is recovered: none was flushed
    reopened = open_log(path, segment_bytes=500, index_interval_bytes=100)
    assert values(read_all(reopened)) == served
    assert reopened.log_end_offset == 103
    assert Scrubber().step({TopicPartition("t", 0): reopened}, 1 << 30) == []
    reopened.close()


def _flip_base_offset(path: Path, target: int, new: int) -> None:
    for segment in sorted(path.glob("*.log")):
        data = bytearray(segment.read_bytes())
        for pos, header in iter_batches(data):
            if header.base_offset == target:
                set_base_offset(data, pos, new)
                segment.write_bytes(data)
                return
    raise AssertionError(f"no batch at {target}")


@pytest.mark.parametrize(("target", "new"), [(10, 11), (13, 12), (40, 41), (100, 99)])
def test_any_other_jump_is_still_damage(tmp_path: Path, target: int, new: int) -> None:
    path = tmp_path / "t-0"
    follower = _follower(path)
    follower.close()  # flushed: damage below the recovery point is never cut away
    _flip_base_offset(path, target, new)
    # Recovered (its indexes lost), the segment is found corrupt, and nothing is cut.
    for index in path.glob("*.index"):
        index.unlink()
    with pytest.raises(CorruptLogError):
        PartitionLog.open(path, follower.config, 10**9, clean_shutdown=False, now_ms=NOW)
    # After a clean start (closed segments trusted), the scrubber finds it.
    try:
        reopened = open_log(path, clean=True, segment_bytes=500, index_interval_bytes=100)
    except CorruptLogError:
        return  # the active segment is always checked
    found = Scrubber().step({TopicPartition("t", 0): reopened}, 1 << 30)
    assert [tp for tp, _ in found] == [TopicPartition("t", 0)]
    reopened.close()


def test_truncation_drops_the_gaps_after_it(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    follower = _follower(path)
    follower.truncate_to(13, NOW)
    assert follower.log_end_offset == 13
    assert all(actual <= 13 for gaps in _gaps(path).values() for actual in gaps.values())
    # The leader moved on differently: dense offsets from 13.
    more = bytearray(batch(2, tag=99))
    set_base_offset(more, 0, 13)
    follower.append_as_follower(bytes(more), NOW)
    crash(follower)
    reopened = open_log(path, segment_bytes=500, index_interval_bytes=100)
    assert [offset for offset, _ in values(read_all(reopened))] == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14]
    reopened.close()


def test_a_gap_before_a_torn_batch_goes_with_it(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    follower = _follower(path, 1 << 20)  # one segment
    crash(follower)
    log_file = next(path.glob("*.log"))
    data = log_file.read_bytes()
    last = max(pos for pos, _ in iter_batches(data))  # the batch at 100, after the gap from 47
    os.truncate(log_file, last + 10)
    reopened = open_log(path, segment_bytes=1 << 20)
    assert reopened.log_end_offset == 47
    assert 47 not in next(iter(_gaps(path).values()))
    # Fetched again from the leader, the batch brings its gap back.
    again = bytearray(batch(3, tag=7))
    set_base_offset(again, 0, 100)
    reopened.append_as_follower(bytes(again), NOW)
    assert reopened.log_end_offset == 103
    reopened.close()
    assert open_log(path, 10**9, segment_bytes=1 << 20).log_end_offset == 103


@pytest.mark.parametrize("target", [7, 8, 10, 20, 39, 44, 47, 60, 99])
def test_truncation_to_an_offset_in_a_gap_cuts_before_the_next_batch(tmp_path: Path, target: int) -> None:
    path = tmp_path / "t-0"
    follower = _follower(path)
    follower.truncate_to(target, NOW)
    assert follower.log_end_offset <= target
    served = [offset for offset, _ in values(read_all(follower))]
    assert served == [o for o in served if o < target] and served
    assert max(served) < target
    crash(follower)
    reopened = open_log(path, segment_bytes=500, index_interval_bytes=100)
    assert [offset for offset, _ in values(read_all(reopened))] == served
    reopened.close()


def test_truncation_inside_a_batch_is_still_refused(tmp_path: Path) -> None:
    follower = _follower(tmp_path / "t-0")
    with pytest.raises(ValueError, match="batch boundary"):
        follower.truncate_to(11, NOW)
    follower.close()
