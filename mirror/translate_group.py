"""Translating a source group's committed offsets into aggregate offsets.

Reads every entry of the mirror's offsets topic for one alias (see
:mod:`tributary.mirror.offset_map`), the group's committed offsets on the source, and
answers per partition the aggregate offset of exactly the record the group
would read next. Optionally commits them for the same group in the
aggregate, so its consumers fail over by subscribing to ``<alias>.<topic>``.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.group.offsets import NO_GENERATION, GroupOffsets, OffsetAndMetadata
from tributary.client.raw.batches import RawBatches
from tributary.client.raw.client import RawClient
from tributary.client.security.settings import PLAINTEXT, SecurityConfig
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.mirror.checkpoint import CheckpointStore
from tributary.mirror.naming import TopicFilter, aggregate_topic
from tributary.mirror.offset_map import MappingEntry, PartitionMap, TranslationError, partition_maps


@dataclass(frozen=True, slots=True)
class Translated:
    topic: str
    partition: int
    source_offset: int
    aggregate_topic: str
    aggregate_offset: int | None
    #: Why there is no aggregate offset, when there is none.
    problem: str = ""


async def read_entries(target: Cluster, topic: str) -> list[MappingEntry]:
    """Every translation entry in the offsets topic, partition by partition, start to end."""
    admin = Admin(target)
    raw = RawClient(target)
    partitions = await admin.partitions_of(topic)
    starts = await admin.earliest_offsets(partitions)
    ends = await admin.latest_offsets(partitions)
    entries: list[MappingEntry] = []
    for tp in partitions:
        position, end = starts[tp], ends[tp]
        while position < end:
            fetched: RawBatches = await raw.fetch_partition(tp.topic, tp.partition, position, max_wait_ms=0)
            if not fetched.batches:
                break
            for record in fetched.iter_records(position, end):
                entry = MappingEntry.decode(record.key, record.value)
                if entry is not None:
                    entries.append(entry)
            position = fetched.next_offset
    return entries


async def translate_group(
    *,
    source: Cluster,
    target: Cluster,
    alias: str,
    group: str,
    offsets_topic: str,
    topic_filter: TopicFilter,
    mirror_group: str,
) -> list[Translated]:
    metadata = await source.refresh_metadata()
    partitions = [
        TopicPartition(t, p) for t in sorted(topic_filter.select(metadata.topics)) for p in metadata.partitions_for(t)
    ]
    committed = await GroupOffsets(source, group).fetch(partitions)
    # The mirror's checkpoints first, then the entries: every entry below a checkpoint is written.
    targets = {tp: TopicPartition(aggregate_topic(alias, tp.topic), tp.partition) for tp in partitions}
    checkpoints = await CheckpointStore(target, mirror_group).load(targets.values())
    maps = partition_maps(await read_entries(target, offsets_topic), alias)
    results: list[Translated] = []
    for tp in partitions:
        offset = committed.get(tp)
        if offset is None:
            continue
        name = targets[tp].topic
        mapping = maps.get((tp.topic, tp.partition), PartitionMap(()))
        checkpoint = checkpoints.get(targets[tp])
        recorded = None if checkpoint is None else checkpoint.source
        try:
            aggregate = mapping.translate(offset, recorded_until=recorded)
            results.append(Translated(tp.topic, tp.partition, offset, name, aggregate))
        except TranslationError as exc:
            results.append(Translated(tp.topic, tp.partition, offset, name, None, str(exc)))
    return results


async def apply(target: Cluster, group: str, results: list[Translated]) -> None:
    """Commit the translated offsets for ``group`` in the aggregate (refused there while
    the group has active members, as any commit outside the group is)."""
    offsets = {
        TopicPartition(r.aggregate_topic, r.partition): OffsetAndMetadata(r.aggregate_offset, "translated")
        for r in results
        if r.aggregate_offset is not None
    }
    if offsets:
        await GroupOffsets(target, group).commit(offsets, lambda: NO_GENERATION)


async def run_translate(
    *,
    source: str,
    target: str,
    alias: str,
    group: str,
    offsets_topic: str,
    topic_filter: TopicFilter,
    mirror_group: str,
    commit: bool,
    source_security: SecurityConfig = PLAINTEXT,
    target_security: SecurityConfig = PLAINTEXT,
) -> list[Translated]:
    async with (
        Cluster(source, ClientConfig(security=source_security)) as source_cluster,
        Cluster(target, ClientConfig(security=target_security)) as target_cluster,
    ):
        with trio.fail_after(source_cluster.config.api_timeout):
            results = await translate_group(
                source=source_cluster, target=target_cluster, alias=alias, group=group,
                offsets_topic=offsets_topic, topic_filter=topic_filter, mirror_group=mirror_group,
            )  # fmt: skip
            if commit:
                await apply(target_cluster, group, results)
    return results


__all__ = ["Translated", "apply", "read_entries", "run_translate", "translate_group"]
