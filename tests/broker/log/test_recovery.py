from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.segment import Segment
from tributary.protocol.compression import Compression
from tributary.protocol.error_codes import ErrorCode

from .helpers import NOW, batch, crash, headers, log_files, open_log, read_all

LOG0 = f"{0:020d}.log"


def _filled(path: Path, n: int = 20, **config: Any) -> tuple[PartitionLog, list[int]]:
    """A log of ``n`` batches; returns it and the batch boundaries (file positions)."""
    log = open_log(path, index_interval_bytes=150, **config)
    rng = random.Random(n)
    for i in range(n):
        log.append(
            batch(rng.randint(1, 4), tag=i, compression=rng.choice([Compression.NONE, Compression.ZSTD])), 0, NOW
        )
    boundaries = [0]
    for header in headers(read_all(log)):
        boundaries.append(boundaries[-1] + header.size)
    return log, boundaries


def _recovered_segments(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    recovered: list[int] = []
    original = Segment.recover

    def spy(self: Segment, index_interval_bytes: int, flushed_until: int = 0) -> int:
        recovered.append(self.base_offset)
        return original(self, index_interval_bytes, flushed_until)

    monkeypatch.setattr(Segment, "recover", spy)
    return recovered


def _crashed(path: Path) -> tuple[list[int], bytes, bytes]:
    """A filled log dropped as a killed process would: its batch boundaries, what it served,
    and its segment file as the crash left it."""
    log, boundaries = _filled(path)
    good = read_all(log)
    crash(log)
    return boundaries, good, (path / LOG0).read_bytes()


def test_a_torn_tail_is_cut_at_the_last_whole_batch(tmp_path: Path) -> None:
    rng = random.Random(11)
    path = tmp_path / "t-0"
    boundaries, good, pristine = _crashed(path)
    offsets = [0] + [h.next_offset for h in headers(good)]
    for _ in range(40):
        cut = rng.randrange(boundaries[-8], boundaries[-1])
        with open(path / LOG0, "wb") as f:
            f.write(pristine[:cut])
        reopened = open_log(path, index_interval_bytes=150)
        kept = max(i for i, b in enumerate(boundaries) if b <= cut)
        assert os.path.getsize(path / LOG0) == boundaries[kept]
        assert reopened.log_end_offset == offsets[kept]
        assert read_all(reopened) == good[: boundaries[kept]]
        crash(reopened)


def test_a_corrupt_byte_in_the_last_batch_loses_that_batch_only(tmp_path: Path) -> None:
    rng = random.Random(12)
    path = tmp_path / "t-0"
    boundaries, good, pristine = _crashed(path)
    last = boundaries[-2]
    # From batchLength on, every byte but partitionLeaderEpoch is checked:
    # length by the walk, magic by the header check, the rest by the CRC.
    positions = [last + p for p in (*range(8, 12), *range(16, boundaries[-1] - last))]
    for position in rng.sample(positions, 40):
        damaged = bytearray(pristine)
        damaged[position] ^= 1 << rng.randrange(8)
        (path / LOG0).write_bytes(damaged)
        reopened = open_log(path, index_interval_bytes=150)
        assert os.path.getsize(path / LOG0) == last, position - last
        assert reopened.log_end_offset == headers(good)[-2].next_offset
        crash(reopened)


def test_corruption_mid_segment_cuts_everything_after_it(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, boundaries = _filled(path)
    crash(log)
    damaged = bytearray((path / LOG0).read_bytes())
    damaged[boundaries[5] + 30] ^= 0xFF
    (path / LOG0).write_bytes(damaged)
    reopened = open_log(path)
    assert os.path.getsize(path / LOG0) == boundaries[5]
    assert len(headers(read_all(reopened))) == 5
    reopened.close()


def test_a_corrupt_older_segment_takes_the_later_ones_with_it(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = _filled(path, 60, segment_bytes=1500)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    second = log.segments[1]
    crash(log)
    name = f"{second.base_offset:020d}.log"
    damaged = bytearray((path / name).read_bytes())
    damaged[-5] ^= 0xFF  # inside the segment's last batch
    (path / name).write_bytes(damaged)
    reopened = open_log(path, 0)
    assert [s.base_offset for s in reopened.segments] == bases[:2]
    assert log_files(path, ".log") == [f"{b:020d}.log" for b in bases[:2]]
    assert reopened.log_end_offset < bases[2]
    # Appends go on from the cut.
    assert reopened.append(batch(1), 0, NOW).base_offset == reopened.log_end_offset - 1
    reopened.close()


def test_only_segments_from_the_recovery_point_are_scanned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-0"
    log, _ = _filled(path, 60, segment_bytes=1500)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    crash(log)
    recovered = _recovered_segments(monkeypatch)
    reopened = open_log(path, bases[-2] + 1)
    assert recovered == bases[-2:]
    assert reopened.log_end_offset == end
    crash(reopened)
    recovered.clear()
    reopened = open_log(path, bases[-1])
    assert recovered == bases[-1:]
    crash(reopened)


def test_a_clean_shutdown_still_verifies_the_active_segment_and_never_cuts_flushed_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    log, boundaries = _filled(path)
    log.close()
    # Damage a record byte of the last batch: only a CRC check notices. After a clean
    # shutdown everything was on disk: this is corruption, not a torn write.
    damaged = bytearray((path / LOG0).read_bytes())
    damaged[-3] ^= 0xFF
    (path / LOG0).write_bytes(damaged)
    recovered = _recovered_segments(monkeypatch)
    with pytest.raises(CorruptLogError) as raised:
        open_log(path, 0, clean=True)
    assert recovered == [0]
    assert raised.value.position == boundaries[-2]
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (path / LOG0).read_bytes() == damaged  # nothing cut, nothing rewritten


def test_after_a_crash_only_data_past_the_recovery_point_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, boundaries = _filled(path)
    offsets = [h.base_offset for h in headers(read_all(log))]
    log.close()
    damaged = bytearray((path / LOG0).read_bytes())
    damaged[boundaries[3] + 30] ^= 0xFF  # inside the fourth batch
    (path / LOG0).write_bytes(damaged)
    # Flushed up to the fourth batch: the damage may be a torn write, and goes with what follows.
    torn = open_log(path, offsets[3], clean=False)
    assert torn.log_end_offset == offsets[3]
    torn.close()
    (path / LOG0).write_bytes(damaged)
    # Flushed past its first record: the same damage is corruption of acknowledged data.
    with pytest.raises(CorruptLogError) as raised:
        open_log(path, offsets[3] + 1, clean=False)
    assert (raised.value.position, raised.value.offset) == (boundaries[3], offsets[3])
    assert (path / LOG0).read_bytes() == damaged


def test_a_clean_shutdown_trusts_older_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-0"
    log, _ = _filled(path, 80, segment_bytes=2500)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    log.close()
    assert len(bases) > 2
    recovered = _recovered_segments(monkeypatch)
    clean = open_log(path, 0, clean=True)
    assert recovered == bases[-1:]
    assert clean.log_end_offset == end
    clean.close()


def test_indexes_rebuilt_by_recovery_equal_those_written_by_appends(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = _filled(path, 80, segment_bytes=2500)
    log.close()
    originals = {name: (path / name).read_bytes() for name in os.listdir(path) if "index" in name}
    assert any(originals.values())
    for name in originals:
        os.unlink(path / name)
    rebuilt = open_log(path, 0, clean=True, index_interval_bytes=150)  # a missing index forces recovery
    rebuilt.close()
    assert {name: (path / name).read_bytes() for name in originals} == originals
    crashed = open_log(path, 0, index_interval_bytes=150)
    crash(crashed)
    assert {name: (path / name).read_bytes() for name in originals} == originals


def test_damaged_indexes_are_repaired(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = _filled(path, 40)
    good = read_all(log)
    log.close()
    index = path / f"{0:020d}.index"
    entries = index.read_bytes()
    assert len(entries) >= 16
    with open(index, "ab") as f:
        f.write(b"\x00\x01\x02")  # a torn entry
    clean = open_log(path, clean=True, index_interval_bytes=150)
    assert os.path.getsize(index) == len(entries)
    tail = read_all(clean, 30)
    assert good.endswith(tail)
    assert headers(tail)[0].base_offset <= 30 <= headers(tail)[0].last_offset
    clean.close()
    index.write_bytes(entries[:-8] + (10**6).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))  # points past the end
    repaired = open_log(path, clean=True, index_interval_bytes=150)
    assert index.read_bytes() == entries
    assert read_all(repaired) == good
    repaired.close()


def test_leftovers_of_a_crash_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    path.mkdir()
    (path / f"{500:020d}.index").write_bytes(b"")
    (path / f"{500:020d}.timeindex").write_bytes(b"")
    (path / "producer-state.snapshot.tmp").write_bytes(b"junk")
    (path / "unrelated.txt").write_bytes(b"kept")
    log = open_log(path)
    assert sorted(os.listdir(path)) == [f"{0:020d}.index", LOG0, f"{0:020d}.timeindex", "unrelated.txt"]
    log.close()


def test_an_empty_directory_starts_at_offset_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "new-3")
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    with log.read(0, 100) as result:
        assert result.size == 0
    log.close()
    reopened = open_log(tmp_path / "new-3", clean=True)
    assert reopened.log_end_offset == 0
    reopened.close()
