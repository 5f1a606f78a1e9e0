"""Sequenced records and a checker over the whole history: every acknowledged record once, in order.

A fault test writes records numbered 0, 1, 2, ... (:func:`sequence_value`), notes what the
cluster acknowledged and where (:class:`History`), reads everything back
(:func:`read_partitions`), and asks :meth:`History.check` what went wrong: acknowledged
records missing or served elsewhere than acknowledged, records served twice, records served
out of the order they were sent in. "It did not crash" proves nothing; this does.

:func:`produce_sequence` writes a sequence with Tributary's own producer; a test driving another
client (confluent-kafka, kafka-python) records its delivery reports in a :class:`History` itself.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tributary.client.blocking import BlockingFetcher
from tributary.client.errors import KafkaError
from tributary.client.producer.producer import Producer

#: What :func:`read_partitions` returns: partition -> [(offset, value)] in offset order.
Served = Mapping[int, Sequence[tuple[int, bytes | None]]]

_WIDTH = 10


def sequence_value(sequence: int, payload: bytes = b"") -> bytes:
    """The value of record number ``sequence``: its number, zero-padded (sorts as it counts),
    then ``-`` and ``payload`` if one is given (to make records as large as a test needs)."""
    number = b"%0*d" % (_WIDTH, sequence)
    return number + b"-" + payload if payload else number


def sequence_of(value: bytes | None) -> int | None:
    """The number a :func:`sequence_value` holds; None for any other value."""
    if value is None:
        return None
    number, _, _ = bytes(value[: _WIDTH + 1]).partition(b"-")
    return int(number) if len(number) == _WIDTH and number.isdigit() else None


@dataclass(frozen=True)
class Verdict:
    """What :meth:`History.check` found; empty lists mean the history holds."""

    #: ``(sequence, partition, offset)`` acknowledged there but not served there (offset None:
    #: acknowledged without an offset, and not served anywhere in that partition).
    lost: list[tuple[int, int, int | None]] = field(default_factory=list)
    #: ``(sequence, times served)`` for records served more than once.
    duplicated: list[tuple[int, int]] = field(default_factory=list)
    #: ``(partition, offset, sequence, previous sequence)`` where a partition goes backwards.
    out_of_order: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: Sequences served though never acknowledged (sent, then failed or unanswered): allowed,
    #: since a record can be written and its acknowledgement lost; reported for the record.
    unacknowledged_served: list[int] = field(default_factory=list)
    acknowledged: int = 0
    served: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.out_of_order)

    def __str__(self) -> str:
        if self.ok:
            return f"every one of {self.acknowledged} acknowledged records served once, in order ({self.served} served)"
        parts = []
        if self.lost:
            parts.append(f"{len(self.lost)} acknowledged records missing, first {self.lost[:5]}")
        if self.duplicated:
            parts.append(f"{len(self.duplicated)} records served more than once, first {self.duplicated[:5]}")
        if self.out_of_order:
            parts.append(f"{len(self.out_of_order)} records out of order, first {self.out_of_order[:5]}")
        return "; ".join(parts)


class History:
    """What was sent, acknowledged (where) and failed, one record number at a time."""

    def __init__(self) -> None:
        self.sent = 0
        #: sequence -> (partition, offset) as the cluster acknowledged it. The offset is None when
        #: the producer learned of the write only from a later record's acknowledgement:
        #: librdkafka's idempotent producer then reports the record persisted, offset unknown
        #: (a broker accepts a sequence only after the one before it).
        self.acknowledged: dict[int, tuple[int, int | None]] = {}
        #: sequence -> why it failed.
        self.failed: dict[int, str] = {}

    def next_value(self) -> tuple[int, bytes]:
        """The number and value of the next record to send; counts it as sent."""
        sequence = self.sent
        self.sent += 1
        return sequence, sequence_value(sequence)

    def acknowledge(self, sequence: int, partition: int, offset: int | None) -> None:
        self.acknowledged[sequence] = (partition, offset)

    def fail(self, sequence: int, reason: str) -> None:
        self.failed[sequence] = reason

    @property
    def unanswered(self) -> int:
        """Sent, and neither acknowledged nor failed yet."""
        return self.sent - len(self.acknowledged) - len(self.failed)

    def check(self, served: Served) -> Verdict:
        """Compare with everything the cluster serves now (:func:`read_partitions`)."""
        at: dict[tuple[int, int], int | None] = {}
        found_in: dict[int, set[int]] = {}
        counts: Counter[int] = Counter()
        out_of_order = []
        for partition, records in served.items():
            previous: int | None = None
            for offset, value in records:
                sequence = sequence_of(value)
                at[partition, offset] = sequence
                if sequence is None:
                    continue
                counts[sequence] += 1
                found_in.setdefault(sequence, set()).add(partition)
                if previous is not None and sequence < previous:
                    out_of_order.append((partition, offset, sequence, previous))
                previous = sequence if previous is None else max(previous, sequence)
        lost = sorted(
            (sequence, partition, offset)
            for sequence, (partition, offset) in self.acknowledged.items()
            if (
                at.get((partition, offset)) != sequence
                if offset is not None
                else partition not in found_in.get(sequence, ())
            )
        )
        return Verdict(
            lost=lost,
            duplicated=sorted((s, n) for s, n in counts.items() if n > 1),
            out_of_order=out_of_order,
            unacknowledged_served=sorted(s for s in counts if s not in self.acknowledged),
            acknowledged=len(self.acknowledged),
            served=sum(counts.values()),
        )


async def produce_sequence(
    producer: Producer, topic: str, count: int, history: History, *, partition: int | None = None
) -> None:
    """Send ``count`` more numbered records through ``producer`` (pipelined, as fast as it
    takes them) and wait for every answer, noting each in ``history``."""
    handles = []
    for _ in range(count):
        sequence, value = history.next_value()
        handles.append((sequence, await producer.enqueue(topic, value, partition=partition)))
    for sequence, handle in handles:
        try:
            metadata = await handle.wait()
        except KafkaError as exc:
            history.fail(sequence, repr(exc))
        else:
            history.acknowledge(sequence, metadata.partition, metadata.offset)


def wait_until_served(bootstrap: str, topic: str, history: History, timeout: float = 30.0) -> None:
    """Until every partition's high watermark has passed the records acknowledged in it, or
    `timeout`. After a leader change the new leader's high watermark catches up only as its
    followers fetch; a read before that misses acknowledged records that are not lost. (A
    record really lost stays missing: the check that follows names it.)"""
    ends: dict[int, int] = {}
    for partition, offset in history.acknowledged.values():
        if offset is not None:
            ends[partition] = max(ends.get(partition, 0), offset + 1)
    deadline = time.monotonic() + timeout
    with BlockingFetcher(bootstrap) as fetcher:
        while time.monotonic() < deadline:
            try:
                bounds = fetcher.offset_bounds(topic, sorted(ends))
            except KafkaError:
                bounds = {}
            if bounds and all(bounds[p][1] >= end for p, end in ends.items()):
                return
            time.sleep(0.1)


def read_partitions(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every record of every partition of ``topic``, from its log start to its end as of now."""
    served: dict[int, list[tuple[int, bytes | None]]] = {}
    with BlockingFetcher(bootstrap) as fetcher:
        for partition, (start, end) in fetcher.offset_bounds(topic).items():
            records = served.setdefault(partition, [])
            if start < end:
                for fetched in fetcher.fetch_range(topic, partition, start, end):
                    records.extend((r.offset, r.value) for r in fetched.iter_records(start, end))
    return served
