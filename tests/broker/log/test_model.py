"""The log against a list of batches: random appends, reads, restarts, torn
tails, retention and truncation must agree with the model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tributary.broker.log.config import LogConfig
from tributary.broker.log.log import PartitionLog
from tributary.protocol.compression import Compression
from tributary.protocol.records import (
    build_batch,
    iter_records,
    parse_batch_header,
    set_base_offset,
    set_partition_leader_epoch,
)

from .helpers import NOW, T0, crash

_batch_specs = st.lists(
    st.tuples(
        st.integers(1, 6),  # records
        st.integers(0, 120),  # value size
        st.integers(-50, 200),  # timestamp step
        st.sampled_from([Compression.NONE, Compression.NONE, Compression.ZSTD]),
    ),
    min_size=1,
    max_size=4,
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="log-model-"))
        self.path = self.root / "t-0"
        self.batches: list[bytes] = []  # as stored, from the log start
        self.bases: list[int] = []
        self.end = 0
        self.timestamp = T0
        self.log: PartitionLog

    @initialize(segment_bytes=st.integers(300, 3000), interval=st.integers(0, 600))
    def start(self, segment_bytes: int, interval: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval, retention_ms=-1)
        self.log = PartitionLog.open(self.path, self.config, now_ms=NOW)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(specs=_batch_specs, epoch=st.integers(0, 5))
    def append(self, specs: list[tuple[int, int, int, Compression]], epoch: int) -> None:
        sent = []
        for count, size, step, codec in specs:
            self.timestamp += step
            records = [
                (None, bytes([65 + len(self.batches) % 26]) * size, (), self.timestamp + i) for i in range(count)
            ]
            sent.append(build_batch(records, compression=codec))
        result = self.log.append(b"".join(sent), epoch, NOW)
        assert result.base_offset == self.end
        for data in sent:
            stored = bytearray(data)
            set_base_offset(stored, 0, self.end)
            set_partition_leader_epoch(stored, 0, epoch)
            self.batches.append(bytes(stored))
            self.bases.append(self.end)
            self.end = parse_batch_header(stored).next_offset
        assert result.last_offset == self.end - 1

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), max_bytes=st.integers(0, 2500), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        offset = data.draw(st.integers(self.log.log_start_offset, self.end))
        first = next((i for i, b in enumerate(self.batches) if parse_batch_header(b).last_offset >= offset), None)
        expected = b""
        if first is not None:
            for i, batch in enumerate(self.batches[first:]):
                if len(expected) + len(batch) > max_bytes and not (i == 0 and min_one):
                    break
                expected += batch
        with self.log.read(offset, max_bytes, min_one_batch=min_one) as result:
            assert result.read_bytes() == expected

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def offset_for_timestamp(self, data: st.DataObject) -> None:
        # Steps may be negative: the timestamps wander below T0 as well as above it.
        stamps = [T0, self.timestamp]
        ts = data.draw(st.integers(min(stamps) - 100, max(stamps) + 100))
        expected = None
        for batch in self.batches:
            header = parse_batch_header(batch)
            if header.max_timestamp >= ts:
                # That batch's first record stamped at or after it (Kafka's answer).
                expected = next((r.offset, r.timestamp) for r in iter_records(batch) if r.timestamp >= ts)
                break
        assert self.log.offset_for_timestamp(ts) == expected

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        point = self.log.recovery_point
        if clean:
            self.log.close()
        else:
            crash(self.log)  # nothing is lost: the page cache outlives the process
        self.log = PartitionLog.open(self.path, self.config, point, clean_shutdown=clean, now_ms=NOW)

    @precondition(lambda self: self.log.segments[-1].size > 0)
    @rule(data=st.data())
    def tear_the_tail(self, data: st.DataObject) -> None:
        active = self.log.segments[-1]
        cut = data.draw(st.integers(0, active.size - 1))
        crash(self.log)
        with open(active.log_path, "r+b") as f:
            f.truncate(cut)
        self.log = PartitionLog.open(self.path, self.config, 0, now_ms=NOW)
        position = 0
        kept = 0
        for i, base in enumerate(self.bases):
            if base >= active.base_offset:
                position += len(self.batches[i])
                if position > cut:
                    break
            kept = i + 1
        self._keep(kept)

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule(data=st.data())
    def retention(self, data: st.DataObject) -> None:
        limit = data.draw(st.integers(0, self.log.size_in_bytes))
        self.log.config = self.config.with_overrides({"retention.bytes": limit})
        self.log.delete_old_segments(NOW)
        self.log.config = self.config
        start = self.log.log_start_offset
        assert start in self.bases or start == self.end
        dropped = sum(1 for base in self.bases if base < start)
        self.batches, self.bases = self.batches[dropped:], self.bases[dropped:]
        assert self.log.size_in_bytes >= min(limit, sum(len(b) for b in self.batches))

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(0, len(self.batches) - 1))
        self.log.truncate_to(self.bases[keep], now_ms=NOW)
        self._keep(keep)

    def _keep(self, count: int) -> None:
        self.end = self.bases[count] if count < len(self.bases) else self.end
        self.batches, self.bases = self.batches[:count], self.bases[:count]

    @invariant()
    def bounds_agree(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == (self.bases[0] if self.bases else self.end)
        assert self.log.size_in_bytes == sum(len(b) for b in self.batches)
        assert self.log.recovery_point <= self.end


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestLogModel = LogMachine.TestCase
