"""The cleaner on one log, in this thread: the latest record of each key stays at its offset,
tombstones stay for delete.retention.ms and then go, batches keep their offsets and producers,
the swap survives a crash at every step."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tributary.broker.log.cleaner.clean import clean
from tributary.broker.log.cleaner.cycle import install, plan_clean
from tributary.broker.log.cleaner.hooks import PHASES
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import TopicPartition
from tributary.broker.log.scrubber import Scrubber
from tributary.protocol.compression import Compression
from tributary.protocol.records import BatchHeader, iter_batches, iter_records

from ..helpers import NOW, T0, crash
from .helpers import (
    CLEANER,
    at,
    compact,
    compacted_config,
    keyed,
    latest,
    marker,
    open_compacted,
    records,
    txn_batch,
)


def _fill(
    plog: PartitionLog, count: int = 200, keys: int = 10, codec: Compression = Compression.NONE
) -> dict[int, tuple[bytes, bytes]]:
    written: dict[int, tuple[bytes, bytes]] = {}
    for start in range(0, count, 5):
        pairs = [(b"k%d" % ((start + i) % keys), b"v%d" % (start + i)) for i in range(5)]
        result = plog.append(keyed(pairs, compression=codec), 0, NOW)
        for i, pair in enumerate(pairs):
            written[result.base_offset + i] = pair
    return written


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD, Compression.GZIP])
def test_the_latest_record_of_each_key_stays_at_its_offset(tmp_path: Path, codec: Compression) -> None:
    plog = open_compacted(tmp_path / "t-0")
    written = _fill(plog, codec=codec)
    before = latest(plog)
    end = plog.log_end_offset
    result = compact(plog)
    assert result is not None and result.segments
    assert latest(plog) == before
    assert plog.log_end_offset == end and plog.log_start_offset == 0
    kept = records(plog)
    for record in kept:
        assert (record.key, record.value) == written[record.offset]  # offsets preserved
    # Below the cleaned point each key is left once; the active segment is never cleaned.
    cleaned = [r.key for r in kept if r.offset < result.cleaned_to]
    assert len(cleaned) == len(set(cleaned))
    active = plog.segments[-1].base_offset
    assert [r.offset for r in kept if r.offset >= active] == list(range(active, end))
    # Rewritten batches keep their codec and their offset span.
    with plog.read(0, 1 << 40) as read:
        data = read.read_bytes()
    for _, header in iter_batches(data):
        if header.record_count:
            assert header.compression == codec
        assert (header.last_offset - header.base_offset + 1) % 5 == 0
    # A reopened log (clean and after a crash) reads the same.
    plog.close()
    again = open_compacted(tmp_path / "t-0")
    assert records(again) == kept
    crash(again)
    recovered = PartitionLog.open(tmp_path / "t-0", compacted_config(), 0, now_ms=NOW)
    assert records(recovered) == kept
    recovered.close()


def test_tombstones_stay_for_delete_retention_then_go(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", delete_retention_ms=60_000)
    plog.append(keyed([(b"a", b"1"), (b"b", b"1")]), 0, NOW)
    plog.append(keyed([(b"a", None), (b"c", b"1")]), 0, NOW)  # a is deleted
    for i in range(10):
        plog.append(keyed([(b"filler%d" % i, b"x" * 100)]), 0, NOW)
    first = compact(plog, None, NOW)
    assert first is not None
    kept = {(r.key, r.value) for r in records(plog)}
    assert (b"a", None) in kept and (b"a", b"1") not in kept  # the delete is still readable
    horizons = {h.delete_horizon_ms for h in _headers(plog) if h.base_offset == 2}
    assert horizons == {NOW + 60_000}  # stamped by the clean that first kept it (KIP-534)
    assert first.next_horizon_ms == NOW + 60_000
    # Before the horizon another clean keeps it; at the horizon it goes.
    assert compact(plog, first.cleaned_to, NOW + 59_999) is not None
    assert (b"a", None) in {(r.key, r.value) for r in records(plog)}
    assert compact(plog, first.cleaned_to, NOW + 60_000) is not None
    assert b"a" not in {r.key for r in records(plog)}
    assert latest(plog) == {b"b": b"1", b"c": b"1", **{b"filler%d" % i: b"x" * 100 for i in range(10)}}
    plog.close()


def _headers(plog: PartitionLog) -> list[BatchHeader]:
    with plog.read(plog.log_start_offset, 1 << 40) as result:
        data = result.read_bytes()
    return [header for _, header in iter_batches(data)]


def _aborts(plog: PartitionLog) -> list[tuple[int, int, int]]:
    """(producer id, first offset, marker offset) of every aborted-transaction index entry."""
    return [(e.producer_id, e.first_offset, e.last_offset) for s in plog.segments for e in s.txn_index.entries]


def _transactional_log(path: Path) -> PartitionLog:
    """Batches as a leader stored them, each in a segment of its own."""
    plog = open_compacted(path, segment_bytes=100)
    for data in (
        txn_batch(0, 5, 0, [(b"k1", b"a1"), (b"k2", b"a2")]),
        marker(2, 5, commit=True),
        txn_batch(3, 6, 0, [(b"k3", b"b3"), (b"k2", b"aborted")]),
        marker(5, 6, commit=False),
        at(6, keyed([(b"k4", b"c4"), (b"k8", b"c8")])),
        txn_batch(8, 5, 2, [(b"k5", b"x")]),
        txn_batch(9, 6, 2, [(b"k6", b"d6")]),
        marker(10, 6, commit=True),
        marker(11, 5, commit=True),
        at(12, keyed([(b"k1", b"z1")])),
        at(13, keyed([(b"k9", b"end")])),
    ):
        plog.append_as_follower(data, NOW)
    return plog


def test_aborted_transactions_go_and_their_markers_after_them(tmp_path: Path) -> None:
    plog = _transactional_log(tmp_path / "t-0")
    plog.config = compacted_config(segment_bytes=100, delete_retention_ms=1000)
    first = compact(plog, None, NOW)
    assert first is not None and first.first_unstable_offset is None
    values = {(r.key, r.value) for r in records(plog) if r.offset < 13}
    # The aborted record of k2 never hid the committed one; the aborted batch is gone whole.
    assert (b"k2", b"a2") in values and (b"k2", b"aborted") not in values and (b"k3", b"b3") not in values
    assert (b"k1", b"a1") not in values and (b"k1", b"z1") in values
    bases = [h.base_offset for h in _headers(plog)]
    assert 3 not in bases
    assert 5 in bases  # the abort marker stays while this pass met its transaction's batches
    # ... and its aborted-transaction index entry with it, in the cleaned segment's .txnindex.
    assert _aborts(plog) == [(6, 3, 5)]
    second = compact(plog, first.cleaned_to, NOW + 1)  # no batch of it left: stamped
    assert second is not None
    assert [h.delete_horizon_ms for h in _headers(plog) if h.base_offset == 5] == [NOW + 1 + 1000]
    compact(plog, first.cleaned_to, NOW + 1 + 1000)
    headers = {h.base_offset: h for h in _headers(plog)}
    assert 5 not in headers
    assert _aborts(plog) == []  # the entry went with its marker
    # Commit markers of transactions whose data is still there stay, unstamped.
    assert all(headers[b].is_control and headers[b].delete_horizon_ms is None for b in (2, 10, 11))
    plog.close()


def test_nothing_from_an_open_transaction_on_is_cleaned(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", segment_bytes=100)
    for data in (
        at(0, keyed([(b"k", b"1")])),
        at(1, keyed([(b"k", b"2")])),
        txn_batch(2, 9, 0, [(b"k", b"open")]),  # no marker yet
        at(3, keyed([(b"k", b"3")])),
        at(4, keyed([(b"other", b"x")])),
    ):
        plog.append_as_follower(data, NOW)
    result = compact(plog, None, NOW)
    assert result is not None and result.first_unstable_offset == 2
    assert result.cleaned_to == 2
    assert [(r.offset, r.value) for r in records(plog)] == [(1, b"2"), (2, b"open"), (3, b"3"), (4, b"x")]
    plog.close()


def test_an_active_producers_last_batch_stays_empty(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", segment_bytes=120)
    plog.append(keyed([(b"k", b"1"), (b"j", b"1")], producer_id=3, producer_epoch=0, base_sequence=0), 0, NOW)
    for i in range(6):
        plog.append(keyed([(b"k", b"%d" % i), (b"j", b"%d" % i)]), 0, NOW)
    compact(plog, None, NOW)
    first = _headers(plog)[0]
    assert (first.base_offset, first.last_offset, first.record_count, first.producer_id) == (0, 1, 0, 3)
    # The producer's next batch still follows on.
    plog.append(keyed([(b"k", b"p")], producer_id=3, producer_epoch=0, base_sequence=2), 0, NOW)
    plog.close()


def test_a_full_key_map_cleans_what_it_mapped_and_leaves_the_rest_dirty(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0")
    written = _fill(plog, 400, 40)
    before = latest(plog)
    planned = plan_clean(plog, None, NOW, CLEANER, force=True)
    assert planned is not None
    request = dataclasses.replace(planned.request, map_capacity=15)
    result = clean(request)
    assert install(plog, planned, result, NOW)
    assert result.map_entries == 15
    assert 0 < result.cleaned_to < planned.request.uncleanable
    assert latest(plog) == before
    for record in records(plog):
        assert (record.key, record.value) == written[record.offset]
    # The next clean goes on from there.
    again = compact(plog, result.cleaned_to, NOW)
    assert again is not None and again.cleaned_to > result.cleaned_to
    assert latest(plog) == before
    plog.close()


@pytest.mark.parametrize("phase", PHASES[:-2])
def test_a_crash_at_any_step_of_a_clean_leaves_a_valid_log(tmp_path: Path, phase: str) -> None:
    path = tmp_path / "t-0"
    plog = open_compacted(path)
    written = _fill(plog, 300, 7, Compression.ZSTD)
    before = latest(plog)
    end = plog.log_end_offset

    class Killed(Exception):
        pass

    def kill(reached: str) -> None:
        if reached == phase:
            raise Killed(reached)

    with pytest.raises(Killed):
        compact(plog, None, NOW, reached=kill)
    crash(plog)  # nothing more runs: the files stay as the step left them
    for clean_shutdown in (False, True):
        recovered = PartitionLog.open(path, compacted_config(), 0, clean_shutdown=clean_shutdown, now_ms=NOW)
        assert latest(recovered) == before
        assert recovered.log_end_offset == end
        for record in records(recovered):
            assert (record.key, record.value) == written[record.offset]
        assert not [name for name in os.listdir(path) if name.endswith((".cleaned", ".swap"))]
        # And it cleans again from there.
        assert compact(recovered, None, NOW) is not None
        assert latest(recovered) == before
        recovered.close()


def test_a_swap_is_refused_when_the_log_changed_meanwhile(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", retention_ms=1)
    _fill(plog, 100, 5)
    planned = plan_clean(plog, None, NOW, CLEANER, force=True)
    assert planned is not None
    result = clean(planned.request)
    plog.config = compacted_config(cleanup_policy="compact,delete", retention_ms=1)
    assert plog.delete_old_segments(NOW + 10**9) > 0  # retention came first
    kept = records(plog)
    assert not install(plog, planned, result, NOW)
    assert records(plog) == kept
    assert not [name for name in os.listdir(tmp_path / "t-0") if name.endswith((".cleaned", ".swap"))]
    plog.close()


def test_cleaned_segments_are_indexed_and_scrub_clean(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", segment_bytes=2000, index_interval_bytes=50)
    _fill(plog, 600, 13, Compression.ZSTD)
    assert compact(plog) is not None
    kept = records(plog)
    offsets = [r.offset for r in kept]
    # A read at any offset starts at the batch holding it, or the first after it (the index
    # entries of the rebuilt .index point at real batch boundaries).
    for wanted in range(plog.log_end_offset):
        with plog.read(wanted, 1) as result:
            data = result.read_bytes()
        first = next(
            (r.offset for pos, _ in iter_batches(data) for r in iter_records(data, pos) if r.offset >= wanted), None
        )
        assert first == next((o for o in offsets if o >= wanted), None), wanted
    # The time index answers from the cleaned segments too.
    assert plog.offset_for_timestamp(T0) == (offsets[0], T0 + offsets[0] % 5)
    assert Scrubber().step({TopicPartition("t", 0): plog}, 1 << 30) == []
    plog.close()


def test_a_compacted_log_rolls_after_max_compaction_lag(tmp_path: Path) -> None:
    plog = open_compacted(tmp_path / "t-0", segment_bytes=1 << 20, max_compaction_lag_ms=1000)
    plog.append(keyed([(b"k", b"1")], timestamp=T0), 0, NOW)
    plog.append(keyed([(b"k", b"2")], timestamp=T0 + 500), 0, NOW)
    assert len(plog.segments) == 1
    plog.append(keyed([(b"k", b"3")], timestamp=T0 + 1500), 0, NOW)  # the first record is now overdue
    assert len(plog.segments) == 2
    plog.close()
