"""The aggregate's topics: created as the source's are found, grown as they grow.

``<alias>.T`` gets T's partition count, so batch k of source partition p goes
to partition p of the aggregate topic and nothing is re-partitioned. A topic
is created with the source topic's relevant configurations (retention,
cleanup policy, maximum batch size, timestamp type; see
``MirrorConfig.copied_configs``) where the source answers DescribeConfigs; a
source that does not gets the aggregate's defaults, logged once.
"""

from __future__ import annotations

import logging

import trio

from tributary.client.admin.admin import Admin
from tributary.client.admin.configs import ResourceType
from tributary.client.errors import InvalidConfigError, KafkaError
from tributary.client.wire.cluster import Cluster
from tributary.mirror.config import MirrorConfig
from tributary.mirror.naming import aggregate_topic

log = logging.getLogger("tributary.mirror")


class AggregateTopics:
    def __init__(self, config: MirrorConfig, source: Cluster, target: Cluster) -> None:
        self.config = config
        self.source = source
        self.target = target
        self.source_admin = Admin(source)
        self.target_admin = Admin(target)
        #: Aggregate topic -> the partition count known to exist.
        self._ready: dict[str, int] = {}
        self._lock = trio.Lock()

    async def ensure_offsets_topic(self) -> None:
        """Compacted, so one entry per run of batches survives; on a cluster without compaction
        (Tributary's brokers before they had a log cleaner) kept without time limit instead, and
        said so. One made that way is switched to compaction once the target accepts it."""
        name, partitions = self.config.offsets_topic, self.config.offsets_topic_partitions
        if name in (await self.target.refresh_metadata()).topics:
            # (creating it again would wait for every partition to have a leader)
            await self._compact_offsets_topic(name)
            return
        try:
            await self.target_admin.create_topic(name, partitions, {"cleanup.policy": "compact"}, exist_ok=True)
        except InvalidConfigError as exc:
            log.warning("event=offsets_topic_uncompacted topic=%s reason=%r (kept: retention.ms=-1)", name, str(exc))
            await self.target_admin.create_topic(
                name, partitions, {"cleanup.policy": "delete", "retention.ms": "-1"}, exist_ok=True
            )

    async def _compact_offsets_topic(self, name: str) -> None:
        try:
            described = await self.target_admin.describe_configs(ResourceType.TOPIC, [name], timeout=10)
        except KafkaError as exc:
            log.warning("event=offsets_topic_configs_unavailable topic=%s error=%r", name, str(exc))
            return
        entry = described.get(name, {}).get("cleanup.policy")
        if entry is None or entry.value is None or "compact" in entry.value:
            return
        try:
            await self.target_admin.alter_topic_configs({name: {"cleanup.policy": "compact"}}, timeout=10)
        except KafkaError as exc:
            log.warning("event=offsets_topic_uncompacted topic=%s reason=%r (kept as it is)", name, str(exc))
            return
        log.info("event=offsets_topic_compacted topic=%s was=%s", name, entry.value)

    async def _source_partition_count(self, topic: str) -> int:
        metadata = self.source.metadata
        if topic not in metadata.topics:
            metadata = await self.source.refresh_metadata()
        info = metadata.topics.get(topic)
        if info is None:
            raise KafkaError(f"source topic {topic!r} is gone")
        return info.partition_count

    async def _source_configs(self, topic: str) -> dict[str, str]:
        """The topic's own settings (not the source broker's defaults) among those copied."""
        try:
            # All keys, filtered here: Tansu 0.6 drops the connection when the request names keys.
            described = await self.source_admin.describe_configs(ResourceType.TOPIC, [topic], timeout=10)
        except KafkaError as exc:
            log.warning("event=source_configs_unavailable topic=%s error=%r (aggregate defaults used)", topic, str(exc))
            return {}
        entries = described.get(topic, {})
        wanted = self.config.copied_configs
        return {k: e.value for k, e in entries.items() if k in wanted and e.value is not None and not e.is_default}

    async def ensure(self, source_topic: str) -> str:
        """The aggregate topic of ``source_topic``, created or grown to the source's partition count."""
        name = aggregate_topic(self.config.source_alias, source_topic)
        count = await self._source_partition_count(source_topic)
        if self._ready.get(name, 0) >= count:
            return name
        async with self._lock:
            if self._ready.get(name, 0) >= count:
                return name
            metadata = await self.target.refresh_metadata()
            info = metadata.topics.get(name)
            if info is None:
                configs = await self._source_configs(source_topic)
                await self.target_admin.create_topic(name, count, configs, exist_ok=True)
                log.info("event=topic_created topic=%s partitions=%d configs=%s", name, count, configs)
            elif info.partition_count < count:
                await self.target_admin.create_partitions({name: count})
                log.info("event=partitions_added topic=%s from=%d to=%d", name, info.partition_count, count)
            self._ready[name] = count
        return name


__all__ = ["AggregateTopics"]
