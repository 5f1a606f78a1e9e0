"""Hypothesis against a dictionary: random keys, values and tombstones appended (some by an
idempotent producer), cleans at random times, restarts and crashes. After every step the log
holds only records appended at the offsets it shows them at, a reader from the start ends up
with the dictionary, each key appears once below the cleaned point, and an active producer's
last batch is still there. Tombstones below the cleaned point are gone once
``delete.retention.ms`` has passed since a clean first saw them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tributary.broker.log.log import PartitionLog
from tributary.protocol.compression import Compression
from tributary.protocol.records import iter_batches

from ..helpers import NOW, crash
from .helpers import compact, compacted_config, keyed, latest, records

DELETE_RETENTION_MS = 10_000
PRODUCER = 77

_pairs = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]), st.one_of(st.none(), st.binary(max_size=20))),
    min_size=1,
    max_size=4,
)


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="cleaner-model-"))
        self.path = self.root / "t-0"
        self.appended: dict[int, tuple[bytes, bytes | None]] = {}
        self.model: dict[bytes, bytes | None] = {}
        self.now = NOW
        self.first_dirty: int | None = None
        self.sequence = 0
        self.producer_last = -1
        self.log: PartitionLog

    @initialize(segment_bytes=st.integers(250, 1500), interval=st.integers(0, 400))
    def start(self, segment_bytes: int, interval: int) -> None:
        self.config = compacted_config(
            segment_bytes=segment_bytes, index_interval_bytes=interval, delete_retention_ms=DELETE_RETENTION_MS
        )
        self.log = PartitionLog.open(self.path, self.config, now_ms=self.now)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _append(self, data: bytes, pairs: list[tuple[bytes, bytes | None]]) -> int:
        result = self.log.append(data, 0, self.now)
        for i, pair in enumerate(pairs):
            self.appended[result.base_offset + i] = pair
            self.model[pair[0]] = pair[1]
        return result.last_offset

    @rule(pairs=_pairs, codec=st.sampled_from([Compression.NONE, Compression.ZSTD]))
    def append(self, pairs: list[tuple[bytes, bytes | None]], codec: Compression) -> None:
        self._append(keyed(list(pairs), compression=codec), pairs)

    @rule(pairs=_pairs)
    def append_idempotent(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        data = keyed(list(pairs), producer_id=PRODUCER, producer_epoch=0, base_sequence=self.sequence)
        self.producer_last = self._append(data, pairs)
        self.sequence += len(pairs)

    @rule(advance=st.integers(0, 2 * DELETE_RETENTION_MS))
    def clean(self, advance: int) -> None:
        self.now += advance
        result = compact(self.log, self.first_dirty, self.now)
        if result is not None:
            self.first_dirty = max(self.first_dirty or 0, result.cleaned_to)

    @rule()
    def settle_tombstones(self) -> None:
        """A clean stamps the horizon of the tombstones it keeps; one after the horizon drops them."""
        first = compact(self.log, self.first_dirty, self.now)
        if first is None:
            return
        stamped_to = first.cleaned_to
        self.now += DELETE_RETENTION_MS
        second = compact(self.log, stamped_to, self.now)
        assert second is not None
        self.first_dirty = max(stamped_to, second.cleaned_to)
        assert not [r.offset for r in records(self.log) if r.value is None and r.offset < stamped_to]

    @rule()
    def restart(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.path, self.config, clean_shutdown=True, now_ms=self.now)

    @rule()
    def crash_and_recover(self) -> None:
        crash(self.log)
        self.log = PartitionLog.open(self.path, self.config, 0, now_ms=self.now)

    @invariant()
    def only_what_was_appended_where_it_was(self) -> None:
        if not hasattr(self, "log"):
            return
        offsets = []
        for record in records(self.log):
            assert record.key is not None
            assert (record.key, record.value) == self.appended[record.offset]
            offsets.append(record.offset)
        assert offsets == sorted(set(offsets))
        assert self.log.log_end_offset == len(self.appended)
        assert self.log.log_start_offset == 0

    @invariant()
    def a_reader_from_the_start_ends_with_the_dictionary(self) -> None:
        if hasattr(self, "log"):
            assert latest(self.log) == {k: v for k, v in self.model.items() if v is not None}

    @invariant()
    def each_key_once_below_the_cleaned_point(self) -> None:
        if not hasattr(self, "log") or self.first_dirty is None:
            return
        keys = [r.key for r in records(self.log) if r.offset < self.first_dirty]
        assert len(keys) == len(set(keys))

    @invariant()
    def the_producers_last_batch_stays(self) -> None:
        # While the log knows the producer (a crash forgets producers whose batches lie before
        # the segments it rebuilds its state from; such a producer may then write at any sequence).
        if not hasattr(self, "log") or self.producer_last < 0 or self.log.producer_state.get(PRODUCER) is None:
            return
        with self.log.read(0, 1 << 40) as result:
            data = result.read_bytes()
        lasts = [h.last_offset for _, h in iter_batches(data) if h.producer_id == PRODUCER]
        assert self.producer_last in lasts


CleanerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_cleaner_against_a_dictionary = CleanerMachine.TestCase
