"""The record a consumer hands to the application, and its decoding from a fetched batch.

Decoding is the consumer's main cost (about three quarters of its CPU time on
small records), and building a second object per record to add the topic and
partition to the decoder's :class:`~protocol.records.Record` cost another
sixth. So a :class:`ConsumerRecord` *is* a Record, made by the decoder itself
(``decode_records(record_type=...)``), and what all records of a batch share
(topic, partition, timestamp type, leader epoch) lives on a subclass made once
per combination (:func:`record_type_for`) instead of in every record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tributary.protocol.records import Headers, Record, decode_records

#: ``timestamp_type`` values, as in the batch attributes.
CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ConsumerRecord(Record):
    """One record of one partition: ``offset``, ``timestamp`` (ms since the epoch,
    of ``timestamp_type`` :data:`CREATE_TIME` or :data:`LOG_APPEND_TIME`), ``key``,
    ``value``, ``headers``, and ``topic``, ``partition`` and ``leader_epoch`` (the
    partition leader epoch the broker stamped on the batch, -1 when unknown).
    Records compare and hash by all of these."""

    topic: ClassVar[str] = ""
    partition: ClassVar[int] = -1
    timestamp_type: ClassVar[int] = CREATE_TIME
    leader_epoch: ClassVar[int] = -1

    def _identity(self) -> tuple[Any, ...]:
        return (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type, self.key,
                self.value, self.headers, self.leader_epoch)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r}, headers={self.headers!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # The per-partition subclasses are made at run time; pickle by value instead.
        return (make_record, self._identity())


_TYPES: dict[tuple[str, int, int, int], type[ConsumerRecord]] = {}


def record_type_for(topic: str, partition: int, timestamp_type: int, leader_epoch: int) -> type[ConsumerRecord]:
    """The ConsumerRecord subclass for records with these shared facts (made once)."""
    key = (topic, partition, timestamp_type, leader_epoch)
    cls = _TYPES.get(key)
    if cls is None:
        namespace = {
            "__slots__": (),
            "topic": topic,
            "partition": partition,
            "timestamp_type": timestamp_type,
            "leader_epoch": leader_epoch,
        }
        cls = _TYPES[key] = type("ConsumerRecord", (ConsumerRecord,), namespace)
    return cls


def make_record(  # noqa: PLR0917 (the fields, in order)
    topic: str,
    partition: int,
    offset: int,
    timestamp: int,
    timestamp_type: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers = (),
    leader_epoch: int = -1,
) -> ConsumerRecord:
    """A ConsumerRecord built field by field (tests, unpickling)."""
    return record_type_for(topic, partition, timestamp_type, leader_epoch)(offset, timestamp, key, value, headers)


def decode_batch(
    record_type: type[ConsumerRecord], buf: bytes | memoryview, pos: int, *, skip_below: int | None, check_crc: bool
) -> list[ConsumerRecord]:
    """The records of the batch at ``pos`` in ``buf``, those below ``skip_below`` left out
    (only the first batch of a fetch can start before the position)."""
    records = decode_records(buf, pos, check_crc=check_crc, record_type=record_type)
    if skip_below is None:
        return records
    return [r for r in records if r.offset >= skip_below]


__all__ = ["CREATE_TIME", "LOG_APPEND_TIME", "ConsumerRecord", "decode_batch", "make_record", "record_type_for"]
