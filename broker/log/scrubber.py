"""Re-reads closed segments with their CRCs, slowly, so that bit rot is found before a reader is
served it.

Fetches are served with sendfile, which never looks at the bytes; the CRC of a batch is checked
when it is appended and when a segment is recovered, not when it is read. A segment that rots
on disk afterwards would be handed to consumers (Kafka does so). The scrubber walks every closed
segment of every log, batch by batch, a slice of bytes at a time, and hands what does not read
back to the log manager, which takes that partition offline (KAFKA_STORAGE_ERROR, files
untouched) as it does for corruption found at start-up.

It is a pure walker over the logs it is given: the broker calls :meth:`Scrubber.step` from a
worker thread with a byte budget, at the rate ``log.scrub.bytes.per.second`` allows, and starts
a new pass every ``log.scrub.interval.ms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.gaps import follow
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import TopicPartition
from tributary.broker.log.segment import Segment, scan_batches
from tributary.protocol.errors import CorruptRecordError


@dataclass(frozen=True, slots=True)
class _Cursor:
    """Where the pass stands: the next batch to check."""

    log: TopicPartition
    segment: int
    position: int
    offset: int


def _check_slice(segment: Segment, start: int, offset: int, *, budget: int) -> tuple[int, int, int]:
    """Checks the segment's batches from ``start`` (where ``offset`` begins) until about
    ``budget`` bytes are checked or the segment ends; returns (position, next offset, bytes
    checked). Raises :class:`CorruptLogError` at a batch that does not read back."""
    position, checked = start, 0
    # Offsets follow each other without gaps except where the segment's gaps file says.
    gaps = segment.gaps.read()
    batches = scan_batches(segment.fd, start, segment.size, verify=True)
    while checked < budget:
        try:
            pos, header = next(batches)
        except StopIteration:
            break
        except CorruptRecordError as exc:
            raise CorruptLogError(segment.log_path, position, offset, str(exc)) from None
        # baseOffset lies outside the CRC: a flip there shows as a jump.
        expected = follow(gaps, offset)
        if header.base_offset != expected:
            reason = f"the batch starts at offset {header.base_offset}, not {expected}"
            raise CorruptLogError(segment.log_path, pos, offset, reason)
        position, offset = pos + header.size, header.next_offset
        checked += header.size
    return position, offset, checked


class Scrubber:
    def __init__(self) -> None:
        self._cursor: _Cursor | None = None
        #: Bytes checked in the current pass; passes completed.
        self.checked = 0
        self.passes = 0

    def step(
        self, logs: Mapping[TopicPartition, PartitionLog], budget: int
    ) -> list[tuple[TopicPartition, CorruptLogError]]:
        """Checks up to about ``budget`` bytes from where the last step stopped; returns the
        logs found corrupt (each once). When every closed segment has been checked, the pass
        is complete (:attr:`passes` grows) and the next step starts over."""
        found: list[tuple[TopicPartition, CorruptLogError]] = []
        cursor = self._cursor
        for key in sorted(logs):
            if cursor is not None and key < cursor.log:
                continue
            plog = logs[key]
            if plog.closed:
                continue
            for segment in plog.segments[:-1]:  # the active segment is still being written
                if cursor is not None and key == cursor.log and segment.base_offset < cursor.segment:
                    continue
                start, offset = 0, segment.base_offset
                if cursor is not None and key == cursor.log and segment.base_offset == cursor.segment:
                    start, offset = cursor.position, cursor.offset
                cursor = None
                if not segment.try_pin():
                    continue  # deleted by retention meanwhile
                try:
                    position, offset, checked = _check_slice(segment, start, offset, budget=budget)
                except CorruptLogError as exc:
                    found.append((key, exc))
                    break  # the log goes offline: its other segments wait for a repair
                finally:
                    segment.unpin()
                budget -= checked
                self.checked += checked
                if budget <= 0:
                    self._cursor = _Cursor(key, segment.base_offset, position, offset)
                    return found
        self._cursor = None
        self.passes += 1
        self.checked = 0
        return found
