"""mirror.windows: reading a partition ahead, against a model log. Whatever the estimates, the
order answers come back in, the failures and the log's growth, the copier is handed every
batch once, in order, and never an answer that starts beyond where it stands."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.client.raw.batches import RawBatches
from tributary.client.wire.metadata import TopicPartition
from tributary.mirror.partition import PartitionState
from tributary.mirror.windows import FetchWindows, Window
from tributary.protocol.records import LOG_OVERHEAD, BatchHeader


def header(base: int, count: int, size: int) -> BatchHeader:
    return BatchHeader(base, size - LOG_OVERHEAD, 0, 2, 0, 0, count - 1, 0, 0, -1, -1, -1, count)


@dataclass
class ModelLog:
    """Batches as a broker holds them: offsets may jump (a log cleaner's gaps); ``end`` is
    what a READ_COMMITTED reader may see."""

    batches: list[BatchHeader] = field(default_factory=list)
    end: int = 0

    def append(self, count: int, size: int, gap: int) -> None:
        base = (self.batches[-1].next_offset if self.batches else 0) + gap
        self.batches.append(header(base, count, size))
        self.end = self.batches[-1].next_offset

    def fetch(self, start: int, max_bytes: int) -> RawBatches:
        """As a broker answers: whole batches from the one holding ``start``, at least one,
        up to ``max_bytes``."""
        chosen: list[tuple[int, BatchHeader]] = []
        size = 0
        for batch in self.batches:
            if batch.next_offset <= start or batch.base_offset >= self.end:
                continue
            if chosen and size + batch.size > max_bytes:
                break
            chosen.append((size, batch))
            size += batch.size
        return RawBatches("t", 0, start, b"\0" * size, tuple(chosen), self.end, 0, self.end)


def drive(
    log: ModelLog,
    windows: FetchWindows,
    rng: random.Random,
    *,
    growth: Sequence[tuple[int, int, int]] = (),
    cleans: Sequence[tuple[float, int]] = (),
    fill_depth: bool = False,
    failure_rate: float = 0.05,
) -> None:
    """Run the windows against ``log`` as the fetcher does (through the partition's own limit
    on what is in flight, PartitionState.next_window; the copier drains at once), checking what
    the copier is handed and that every answer's bytes are accounted for (the byte budget
    depends on it). The log grows by ``growth``; each of ``cleans`` (a chance per step, which
    batch) removes a batch as a log cleaner does, the high watermark staying. ``fill_depth``
    sends every window the partition allows each time (else a random few)."""
    growth, cleans = list(growth), list(cleans)
    state = PartitionState.create(TopicPartition("t", 0), TopicPartition("east.t", 0))
    state.windows = windows
    position = windows.frontier
    copied: list[int] = []
    in_flight: list[Window] = []
    held = 0  # bytes of answers received and neither handed on nor dropped
    cleaned = bool(cleans)
    for _ in range(5000):
        if cleans and rng.random() < cleans[0][0]:
            _, which = cleans.pop(0)
            if log.batches:
                del log.batches[which % len(log.batches)]
        if growth and (position >= log.end or rng.random() < 0.3):
            log.append(*growth.pop(0))
        # Once the last batches are cleaned away the log ends below its high watermark.
        last = log.batches[-1].next_offset if log.batches else 0
        if position >= last and not growth and not cleans:
            break
        for _ in range(10**6 if fill_depth else rng.randint(0, 4)):
            window = state.next_window(windows.window_bytes)
            if window is None:
                break
            windows.sent(window)
            in_flight.append(window)
        if not in_flight:
            window = state.next_window(windows.window_bytes)
            assert window is not None, f"nothing in flight and nothing to send: stalled at {position} of {log.end}"
            windows.sent(window)
            in_flight.append(window)
        window = in_flight.pop(rng.randrange(len(in_flight)))
        if rng.random() < failure_rate:
            windows.failed(window)
        else:
            result = log.fetch(window.start, windows.window_bytes)
            if windows.knows(window):
                held += len(result.records)
            for answer in windows.answered(window, result):
                held -= len(answer.records)
                # An answer covers from where it was asked, or from the batch holding that.
                covered_from = min(answer.fetch_offset, answer.batches[0][1].base_offset)
                assert covered_from <= position, "an answer starting beyond the copier's position"
                for _, batch in answer.batches:
                    if batch.next_offset > position:
                        copied.append(batch.base_offset)
                        position = batch.next_offset
        held -= sum(len(answer.records) for answer in windows.take_dropped())
        assert held == sum(len(answer.records) for answer in windows.held()), "bytes held, handed on, dropped"
        in_flight = [w for w in in_flight if windows.knows(w) and w.result is None]
    else:
        raise AssertionError(f"no progress: at {position} of {log.end}")
    kept = [b.base_offset for b in log.batches]
    if cleaned:
        # Batches cleaned away after they were copied were copied all the same.
        assert copied == sorted(set(copied)), "batches handed on out of order or twice"
        assert set(kept) <= set(copied), "a batch the log kept was skipped"
    else:
        assert copied == kept
        assert position == log.end


batch_shapes = st.tuples(st.integers(1, 50), st.integers(100, 5000), st.sampled_from([0, 0, 0, 1, 7]))


@settings(max_examples=150, deadline=None)
@given(
    shapes=st.lists(batch_shapes, min_size=1, max_size=40),
    growth=st.lists(batch_shapes, max_size=20),
    window_bytes=st.integers(5000, 40_000),
    depth=st.integers(1, 5),
    seed=st.integers(0, 2**32),
)
def test_every_batch_is_handed_on_once_in_order(
    shapes: list[tuple[int, int, int]], growth: list[tuple[int, int, int]], window_bytes: int, depth: int,
    seed: int,
) -> None:  # fmt: skip
    log = ModelLog()
    for shape in shapes:
        log.append(*shape)
    start = log.batches[0].base_offset
    drive(log, FetchWindows(start, window_bytes=window_bytes, depth=depth), random.Random(seed), growth=growth)


def test_windows_beyond_the_first_go_out_once_the_rate_is_known() -> None:
    log = ModelLog()
    for _ in range(100):
        log.append(10, 1000, 0)  # 100 bytes per offset
    windows = FetchWindows(0, window_bytes=10_000, depth=4)
    first = windows.next_window()
    assert first is not None and first.start == 0
    windows.sent(first)
    assert windows.next_window() is None, "nothing known yet: one fetch at a time"
    (answer,) = windows.answered(first, log.fetch(0, 10_000))
    assert answer.next_offset == 100 and windows.frontier == 100
    starts = []
    while (window := windows.next_window()) is not None:
        windows.sent(window)
        starts.append(window.start)
    # The first at the frontier; each next one half a batch (5 offsets) into the batch where the
    # one before is expected to end: ten batches of 1,000 bytes (100 offsets) fit in a window.
    assert starts == [100, 205, 305, 405]


def test_an_empty_answer_goes_back_to_one_fetch_at_the_end() -> None:
    log = ModelLog()
    for _ in range(30):
        log.append(10, 1000, 0)
    windows = FetchWindows(0, window_bytes=10_000, depth=4)
    first = windows.next_window()
    assert first is not None
    windows.sent(first)
    windows.answered(first, log.fetch(0, 10_000))
    ahead = []
    while (window := windows.next_window()) is not None:
        windows.sent(window)
        ahead.append(window)
    assert [w.start for w in ahead] == [100, 205], "never from the source's end (300) on"
    assert windows.answered(ahead[1], log.fetch(205, 10_000)) == [], "waits for the window before it"
    due = windows.answered(ahead[0], log.fetch(100, 10_000))
    # The second answer starts with the batch holding 205, which starts where the first ends.
    assert [(a.fetch_offset, a.batches[0][1].base_offset) for a in due] == [(100, 100), (205, 200)]
    assert windows.frontier == 300
    tail = windows.next_window()
    assert tail is not None and tail.start == 300
    windows.sent(tail)
    assert windows.answered(tail, log.fetch(300, 10_000)) == []
    again = windows.next_window()
    assert again is not None and again.start == 300
    windows.sent(again)
    assert windows.next_window() is None, "at the end: one long poll, nothing ahead"


def test_a_gap_left_by_a_high_estimate_is_fetched_before_what_lies_beyond() -> None:
    log = ModelLog()
    for count in [10] * 10 + [1] * 500:  # the rate learned from the first batches overshoots later
        log.append(count, 1000, 0)
    windows = FetchWindows(0, window_bytes=10_000, depth=2)
    first = windows.next_window()
    assert first is not None
    windows.sent(first)
    windows.answered(first, log.fetch(0, 10_000))  # offsets 0-99
    head, ahead = windows.next_window(), None
    assert head is not None
    windows.sent(head)
    ahead = windows.next_window()
    assert ahead is not None and ahead.start == 205
    windows.sent(ahead)
    assert windows.answered(ahead, log.fetch(205, 10_000)) == [], "waits for the window before it"
    due = windows.answered(head, log.fetch(100, 10_000))  # offsets 100-109: short of 205
    assert [a.fetch_offset for a in due] == [100]
    gap = windows.next_window()
    assert gap is not None and gap.start == 110
    windows.sent(gap)
    due = windows.answered(gap, log.fetch(110, 10_000))
    assert [a.fetch_offset for a in due] == [110]
    assert windows.frontier == 120


def test_an_answer_for_a_dropped_window_is_ignored() -> None:
    windows = FetchWindows(0, window_bytes=1000, depth=3)
    first = windows.next_window()
    assert first is not None
    windows.sent(first)
    windows.failed(first)
    assert windows.answered(first, ModelLog().fetch(0, 1000)) == []
    assert windows.frontier == 0


def test_depth_and_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        FetchWindows(0, window_bytes=1000, depth=0)


def test_windows_ahead_fetch_each_batch_once_when_the_estimate_holds() -> None:
    """Batches of 9 to 11 offsets (the estimate is 10): every answer starts with the batch where
    the one before ends, so no batch crosses the link twice and no gap is fetched."""
    log = ModelLog()
    for i in range(400):
        log.append(9 + i % 3, 1000, 0)
    windows = FetchWindows(0, window_bytes=10_000, depth=4)
    fetched: list[int] = []
    pending: list[Window] = []
    while windows.frontier < log.end:
        while (window := windows.next_window()) is not None:
            windows.sent(window)
            pending.append(window)
        window = pending.pop(0)
        answer = log.fetch(window.start, windows.window_bytes)
        fetched += [batch.base_offset for _, batch in answer.batches]
        windows.answered(window, answer)
        pending = [w for w in pending if windows.knows(w)]
    assert fetched == [b.base_offset for b in log.batches], "each batch fetched exactly once"


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(
        st.tuples(st.integers(1, 40), st.integers(100, 3000), st.sampled_from([0, 0, 1, 3, 50, 400, 3000])),
        min_size=2, max_size=60,
    ),
    window_bytes=st.integers(2000, 20_000),
    depth=st.integers(2, 8),
    seed=st.integers(0, 2**32),
)  # fmt: skip
def test_a_gap_window_goes_out_when_every_window_is_in_flight(
    shapes: list[tuple[int, int, int]], window_bytes: int, depth: int, seed: int
) -> None:
    """A compacted source's offsets jump irregularly, so read-ahead estimates overshoot: the
    answer of the first window then starts beyond the frontier, and a window for the gap is put
    in front of it, unsent. With the partition's full depth in flight (answers held behind the
    gap count as in flight) the partition's limit held that window back for ever: the copy of a
    compacted source stalled without an error. The fetcher here fills the depth every time."""
    log = ModelLog()
    for shape in shapes:
        log.append(*shape)
    windows = FetchWindows(log.batches[0].base_offset, window_bytes=window_bytes, depth=depth)
    drive(log, windows, random.Random(seed), fill_depth=True, failure_rate=0)


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(
        st.tuples(st.integers(1, 40), st.integers(100, 3000), st.sampled_from([0, 0, 1, 3, 50, 400])),
        min_size=2, max_size=50,
    ),
    cleans=st.lists(st.tuples(st.floats(0.05, 1), st.integers(0, 10**6)), max_size=30),
    window_bytes=st.integers(2000, 20_000),
    depth=st.integers(1, 8),
    seed=st.integers(0, 2**32),
)  # fmt: skip
def test_a_source_compacted_while_it_is_read_ahead(
    shapes: list[tuple[int, int, int]], cleans: list[tuple[float, int]], window_bytes: int, depth: int,
    seed: int,
) -> None:  # fmt: skip
    """A log cleaner removes batches while the partition is read ahead: answers fetched before and
    after a clean are handed on together, and a fetch may land in a range that was there when it
    was estimated and is gone when it is answered (the next batch comes back, or nothing: the
    last batches may go too, as a tombstone's do once its delete horizon passed, and the log then
    ends below the high watermark, where a fetch finds nothing). The copier still gets batches
    in order, each once, never an answer starting beyond its position, and among them every batch
    the log holds at the end; the reader never stalls."""
    log = ModelLog()
    for shape in shapes:
        log.append(*shape)
    windows = FetchWindows(log.batches[0].base_offset, window_bytes=window_bytes, depth=depth)
    drive(log, windows, random.Random(seed), cleans=cleans, fill_depth=True, failure_rate=0)
