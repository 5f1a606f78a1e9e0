"""Exact offset translation, sans-IO: what the offsets topic holds and how it is read.

For the batches it copies, the mirror writes entries to a compacted topic in
the aggregate cluster: the source topic, partition, the first and last source
offsets, and the aggregate offset the first landed at. Batches are copied
whole, so record ``source_base + d`` is aggregate record ``aggregate_base + d``
for every ``d`` in the batch: translation is exact, not an estimate. One entry
covers a run of consecutive batches whose offsets all moved by the same amount
(no transaction marker, aborted transaction or compaction gap between them).

A committed source offset ``C`` (the next record to read) translates to:

- inside a copied batch: ``aggregate_base + (C - source_base)``;
- between copied batches (at a transaction marker, an aborted transaction, or
  the end of a batch): the aggregate base of the next copied batch;
- past every copied batch: the aggregate offset after the last one.

Entries are keyed by (alias, topic, partition, source base offset), so
compaction keeps one per run and a re-written entry replaces its twin.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class TranslationError(ValueError):
    """A source offset the recorded entries cannot translate."""


@dataclass(frozen=True, slots=True, order=True)
class MappingEntry:
    alias: str
    topic: str
    partition: int
    source_base: int
    source_last: int
    aggregate_base: int

    @property
    def aggregate_next(self) -> int:
        return self.aggregate_base + (self.source_last - self.source_base) + 1

    def key(self) -> bytes:
        return json.dumps([self.alias, self.topic, self.partition, self.source_base], separators=(",", ":")).encode()

    def value(self) -> bytes:
        return json.dumps(
            {"source_last": self.source_last, "aggregate_base": self.aggregate_base}, separators=(",", ":")
        ).encode()

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> MappingEntry | None:
        """The entry a record holds, or None for a record that is not one (or a tombstone)."""
        if key is None or value is None:
            return None
        try:
            alias, topic, partition, source_base = json.loads(key)
            fields = json.loads(value)
            return cls(str(alias), str(topic), int(partition), int(source_base),
                       int(fields["source_last"]), int(fields["aggregate_base"]))  # fmt: skip
        except (ValueError, TypeError, KeyError):
            return None


class PartitionMap:
    """One source partition's entries, for lookups."""

    def __init__(self, entries: Iterable[MappingEntry]) -> None:
        # Of two entries with the same base the longer is kept (both are true). An entry
        # may cover a run of batches, and one written again after a crash (for a single batch)
        # may lie inside a run: those add nothing and are dropped, so that the entry with the
        # greatest base at or below an offset is the one that covers it, if any does.
        by_base: dict[int, MappingEntry] = {}
        for e in entries:
            known = by_base.get(e.source_base)
            if known is None or e.source_last >= known.source_last:
                by_base[e.source_base] = e
        kept: list[MappingEntry] = []
        for base in sorted(by_base):
            entry = by_base[base]
            if kept and entry.source_last <= kept[-1].source_last:
                continue
            kept.append(entry)
        self.entries: Sequence[MappingEntry] = kept
        self._bases = [e.source_base for e in self.entries]

    def translate(self, committed: int, *, recorded_until: int | None = None) -> int:
        """The aggregate offset of the record a group that committed ``committed`` reads next.

        ``recorded_until`` is the source offset of the mirror's checkpoint: every batch below
        it has its entry. Past the last entry an offset is only known exactly when it is the
        end of that entry, or when the checkpoint says nothing was copied in between (only
        markers or aborted transactions were skipped); otherwise the mirror may have copied
        batches whose entries are not written yet, and guessing could make a consumer re-read."""
        if not self.entries:
            raise TranslationError("no batch of this partition has been mirrored")
        if committed < self.entries[0].source_base:
            raise TranslationError(
                f"offset {committed} precedes the first mirrored batch (source offset {self.entries[0].source_base})"
            )
        i = bisect.bisect_right(self._bases, committed) - 1
        entry = self.entries[i]
        if committed <= entry.source_last:
            return entry.aggregate_base + (committed - entry.source_base)
        if i + 1 < len(self.entries):
            return self.entries[i + 1].aggregate_base
        if committed == entry.source_last + 1 or (recorded_until is not None and committed <= recorded_until):
            return entry.aggregate_next
        known = entry.source_last + 1 if recorded_until is None else max(entry.source_last + 1, recorded_until)
        raise TranslationError(
            f"offset {committed} is past what the mirror has recorded (source offset {known}): "
            "run translate again once the mirror has caught up"
        )


def partition_maps(entries: Iterable[MappingEntry], alias: str) -> dict[tuple[str, int], PartitionMap]:
    grouped: dict[tuple[str, int], list[MappingEntry]] = {}
    for entry in entries:
        if entry.alias == alias:
            grouped.setdefault((entry.topic, entry.partition), []).append(entry)
    return {tp: PartitionMap(group) for tp, group in grouped.items()}


__all__ = ["MappingEntry", "PartitionMap", "TranslationError", "partition_maps"]
