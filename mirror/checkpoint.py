"""Where the mirror records its progress: committed offsets in the aggregate cluster.

Per aggregate partition the mirror commits, under its group id, the
aggregate offset after the last batch it knows was acknowledged, with the
source offset after that batch in the commit's metadata. A checkpoint is a
pair of positions that correspond; recovery starts from it and reconciles
whatever the aggregate holds beyond it (see :mod:`mirror.recovery`).

The checkpoint lives in the aggregate, next to the data it describes, not in
the source: writing it costs no round trip over the long link, and it works
whatever the source broker supports. Commits are made outside group
membership (generation -1), which a coordinator accepts for a group without
members; on the aggregate the mirror's group has none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tributary.client.group.offsets import NO_GENERATION, GroupOffsets, OffsetAndMetadata
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Source offset ``source`` and aggregate offset ``aggregate`` correspond: the
    next batch to copy starts at ``source`` and will land at ``aggregate``."""

    source: int
    aggregate: int

    def metadata(self) -> str:
        return json.dumps({"source_offset": self.source}, separators=(",", ":"))

    @classmethod
    def from_commit(cls, committed: OffsetAndMetadata) -> Checkpoint | None:
        try:
            source = int(json.loads(committed.metadata)["source_offset"])
        except (ValueError, TypeError, KeyError):
            return None
        return cls(source=source, aggregate=committed.offset)


class CheckpointStore:
    def __init__(self, aggregate: Cluster, group: str) -> None:
        self._offsets = GroupOffsets(aggregate, group)

    async def load(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Checkpoint | None]:
        committed = await self._offsets.fetch_committed(partitions)
        return {tp: (None if c is None else Checkpoint.from_commit(c)) for tp, c in committed.items()}

    async def save(self, checkpoints: Mapping[TopicPartition, Checkpoint]) -> None:
        if checkpoints:
            offsets = {tp: OffsetAndMetadata(c.aggregate, c.metadata()) for tp, c in checkpoints.items()}
            await self._offsets.commit(offsets, lambda: NO_GENERATION)


__all__ = ["Checkpoint", "CheckpointStore"]
