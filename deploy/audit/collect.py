"""Gathering the audit's inputs: time indexes of the source and aggregate partitions, the
mirrors' checkpoints, and the loader's committed manifests (model.py does the arithmetic).

Everything is asked of the components themselves, over the wire and from the warehouse's
state directory, as ``tributary status`` does: no state of ``tributary up`` is needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.group.offsets import OffsetAndMetadata
from tributary.client.raw.batches import EARLIEST, LATEST
from tributary.client.security.settings import SecurityConfig, SecuritySettingsError
from tributary.client.wire.cluster import Cluster as ClientCluster
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.appliance.security_files import tool_security
from tributary.deploy.appliance.topology import Cluster, Load, Mirror, Topology
from tributary.deploy.audit.model import HOUR_MS, PartitionIndex, Stream, add_counts, hours
from tributary.mirror.checkpoint import Checkpoint
from tributary.mirror.naming import TopicFilter, aggregate_topic, source_of

_MANIFEST_HOUR = "%Y-%m-%dT%H:%M:%S.%fZ"


class AuditError(Exception):
    """Something the audit needs cannot be read; the message names it."""


def _client_config(timeout: float, security: SecurityConfig) -> ClientConfig:
    return ClientConfig(
        connect_timeout=timeout,
        request_timeout=timeout,
        api_timeout=timeout,
        client_id="tributary-audit",
        security=security,
    )


def _security(topology: Topology, cluster: Cluster) -> SecurityConfig:
    """The admin's login on a cluster's local listener where it needs one (security_files.py)."""
    try:
        return tool_security(topology, cluster)
    except SecuritySettingsError as exc:
        raise AuditError(f"cluster '{cluster.name}': cannot log in as admin: {exc}") from None


async def time_indexes(
    admin: Admin, partitions: Sequence[TopicPartition], boundaries: Sequence[int]
) -> dict[TopicPartition, PartitionIndex]:
    """Each partition's offsets at the boundaries (ListOffsets by timestamp) and its log bounds."""
    if not partitions:
        return {}
    starts = await admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
    ends = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
    at: dict[TopicPartition, list[int]] = {tp: [] for tp in partitions}
    for boundary in boundaries:
        listed = await admin.list_offsets(dict.fromkeys(partitions, boundary))
        for tp in partitions:
            # -1: no record that recent; the hour, and every later one, ends at the log's end.
            offset = listed[tp].offset
            at[tp].append(ends[tp].offset if offset < 0 else offset)
    return {
        tp: PartitionIndex(tuple(boundaries), tuple(at[tp]), starts[tp].offset, ends[tp].offset) for tp in partitions
    }


def _topic_filter(mirror: Mirror, aliases: Iterable[str]) -> TopicFilter:
    return TopicFilter(
        mirror.alias,
        re.compile(mirror.topics),
        re.compile(mirror.exclude) if mirror.exclude else None,
        frozenset(aliases) - {mirror.alias},
    )


async def _partitions(admin: Admin, topics: Iterable[str]) -> list[TopicPartition]:
    listed = await admin.list_topics()
    return [TopicPartition(t, p) for t in sorted(topics) if t in listed for p in listed[t].partitions]


async def mirror_streams(topology: Topology, mirror: Mirror, boundaries: Sequence[int], timeout: float) -> list[Stream]:
    """Every topic ``mirror`` copies: source and aggregate time indexes and its checkpoints."""
    source_cluster = topology.clusters[mirror.source]
    target_cluster = topology.clusters[mirror.target]
    config = _client_config(timeout, _security(topology, source_cluster))
    datacenter = source_cluster.datacenter
    streams: dict[str, Stream] = {}
    async with ClientCluster(source_cluster.bootstrap, config) as client:
        admin = Admin(client)
        chosen = _topic_filter(mirror, (m.alias for m in topology.mirrors.values())).select(await admin.list_topics())
        for tp, index in (await time_indexes(admin, await _partitions(admin, chosen), boundaries)).items():
            streams.setdefault(tp.topic, Stream(datacenter, tp.topic)).source[tp.partition] = index
    config = _client_config(timeout, _security(topology, target_cluster))
    async with ClientCluster(target_cluster.bootstrap, config) as client:
        admin = Admin(client)
        partitions = await _partitions(admin, (aggregate_topic(mirror.alias, t) for t in streams))
        for tp, index in (await time_indexes(admin, partitions, boundaries)).items():
            streams[tp.topic.split(".", 1)[1]].aggregate[tp.partition] = index
        committed = await admin.committed_offsets(mirror.group, partitions) if partitions else {}
    for tp in partitions:
        stream = streams[tp.topic.split(".", 1)[1]]
        commit = committed.get(tp)
        checkpoint = Checkpoint.from_commit(OffsetAndMetadata(commit.offset, commit.metadata or "")) if commit else None
        stream.checkpoints[tp.partition] = None if checkpoint is None else checkpoint.source
    return [streams[t] for t in sorted(streams)]


def _warehouse(load: Load) -> Path:
    parsed = urlparse(load.output)
    if parsed.scheme != "file":
        raise AuditError(f"load {load.name!r}: the audit reads file:// warehouses only, not {load.output}")
    return Path(parsed.path)


def apply_loads(topology: Topology, streams: Sequence[Stream], mirror: Mirror, window: Sequence[int]) -> None:
    """The loader's committed per-hour counts and offsets, from the state directory of every
    load of the mirror's target cluster (a stream no load covers gets ``loaded = False``)."""
    loads = [load for load in topology.loads.values() if load.cluster == mirror.target]
    by_topic = {aggregate_topic(mirror.alias, s.topic): s for s in streams}
    covered: set[str] = set()
    for load in loads:
        pattern = re.compile(load.topics)
        covered.update(t for t in by_topic if pattern.fullmatch(t))
        state = _warehouse(load) / "_tributary"
        commits = sorted((state / "offsets").glob("*.json"))
        for commit in commits:
            manifest = state / "manifests" / commit.name
            if not manifest.exists():
                raise AuditError(f"load {load.name!r}: run {commit.stem} is committed but its manifest is missing")
            for count in json.loads(manifest.read_text())["counts"]:
                stream = by_topic.get(count["topic"])
                if stream is not None:
                    hour = _hour_ms(count["hour"])
                    if hour in window:
                        add_counts(stream.hadoop, {hour: int(count["records"])})
        if commits:
            offsets = json.loads(commits[-1].read_text())["offsets"]
            for topic, parts in offsets.items():
                stream = by_topic.get(topic)
                if stream is not None and source_of(topic) is not None:
                    stream.loaded_up_to.update({int(p): int(o) for p, o in parts.items()})
    for topic, stream in by_topic.items():
        stream.loaded = topic in covered


def _hour_ms(iso: str) -> int:
    return int(datetime.strptime(iso, _MANIFEST_HOUR).replace(tzinfo=UTC).timestamp() * 1000)


async def collect(topology: Topology, start_ms: int, end_ms: int, timeout: float = 10.0) -> list[Stream]:
    """Every stream of every mirror of the topology over the whole hours from the one holding
    ``start_ms`` to the one holding ``end_ms``."""
    window = hours(start_ms, end_ms)
    if not window:
        raise AuditError("the audit's window is empty: --from must be before --to")
    boundaries = [*window, window[-1] + HOUR_MS]
    streams: list[Stream] = []
    for mirror in topology.mirrors.values():
        found = await mirror_streams(topology, mirror, boundaries, timeout)
        apply_loads(topology, found, mirror, window)
        streams.extend(found)
    return streams
