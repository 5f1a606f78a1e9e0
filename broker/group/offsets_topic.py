"""``__consumer_offsets`` in the cluster: created on first need, as Kafka does it when
a client first looks for a coordinator, and where a group's coordinator is."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

import trio

from tributary.broker.cluster.errors import ClusterError, TopicExistsError
from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.group.config import GroupConfig
from tributary.broker.group.placement import OFFSETS_TOPIC, partition_for
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

#: How long a FindCoordinator waits for the topic to be created before answering
#: COORDINATOR_NOT_AVAILABLE (the client then asks again).
CREATE_TIMEOUT_S = 10.0


def offsets_topic_config(config: GroupConfig) -> dict[str, str]:
    # Compacted, as Kafka's: the log cleaner keeps the last commit of each group, topic and
    # partition (and drops tombstones of deleted offsets and groups after delete.retention.ms),
    # so a coordinator that takes a partition over loads little however many commits were made.
    return {
        "cleanup.policy": "compact",
        "retention.ms": "-1",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
    }


def _compacted(current: Mapping[str, str]) -> Mapping[str, str]:
    """The topic's config with compaction on (``delete`` kept if it was there: an operator's choice)."""
    policies = [p.strip() for p in current.get("cleanup.policy", "delete").split(",") if p.strip()]
    if "compact" not in policies:
        policies.append("compact")
    return {**current, "cleanup.policy": ",".join(policies)}


class OffsetsTopic:
    def __init__(self, registry: ClusterRegistry, config: GroupConfig) -> None:
        self._registry = registry
        self._config = config
        # One creation at a time from this broker; the others wait and find the topic.
        self._lock = trio.Lock()
        self._compaction_checked = False

    async def _ensure_compacted(self) -> None:
        """A topic made without compaction (by hand, or by another tool) is switched to it, once
        per broker start: without it the topic grows with every commit and so does every load."""
        self._compaction_checked = True
        info = self._registry.snapshot.topics.get(OFFSETS_TOPIC)
        if info is None or "compact" in info.config.get("cleanup.policy", "delete"):
            return
        log.warning(
            "%s has cleanup.policy=%s: adding compact (its records are kept per key from now on)",
            OFFSETS_TOPIC, info.config.get("cleanup.policy", "delete"),
        )  # fmt: skip
        try:
            await self._registry.alter_topic_config(OFFSETS_TOPIC, _compacted, timeout=CREATE_TIMEOUT_S)
        except (ClusterError, TimeoutError) as exc:
            log.warning("could not switch %s to compaction (tried again at the next start): %s", OFFSETS_TOPIC, exc)

    async def ensure(self) -> bool:
        """Creates the topic if it does not exist yet; whether it exists now."""
        if OFFSETS_TOPIC in self._registry.snapshot.topics:
            if not self._compaction_checked:
                await self._ensure_compacted()
            return True
        async with self._lock:
            if OFFSETS_TOPIC in self._registry.snapshot.topics:
                return True
            partitions = self._config.offsets_topic_partitions
            wanted = self._config.offsets_topic_replication_factor
            live = len(self._registry.snapshot.brokers)
            replication_factor = max(1, min(wanted, live))
            if replication_factor < wanted:
                log.warning(
                    "creating %s with replication factor %d: offsets.topic.replication.factor is %d but only %d "
                    "brokers are alive", OFFSETS_TOPIC, replication_factor, wanted, live,
                )  # fmt: skip
            try:
                await self._registry.create_topic(
                    OFFSETS_TOPIC,
                    partitions,
                    offsets_topic_config(self._config),
                    replication_factor=replication_factor,
                    timeout=CREATE_TIMEOUT_S,
                )
                log.info("created %s with %d partitions, replication factor %d", OFFSETS_TOPIC, partitions,
                         replication_factor)  # fmt: skip
            except TopicExistsError:
                # Another broker creates it: wait until this broker sees it.
                with contextlib.suppress(TimeoutError):
                    await self._registry.wait_for(lambda s: OFFSETS_TOPIC in s.topics, CREATE_TIMEOUT_S)
            except (ClusterError, TimeoutError) as exc:
                log.warning("creating %s failed: %s", OFFSETS_TOPIC, exc)
        return OFFSETS_TOPIC in self._registry.snapshot.topics

    async def coordinator_for(self, group_id: str) -> tuple[ErrorCode, BrokerInfo | None]:
        """The leader of the group's partition, or COORDINATOR_NOT_AVAILABLE."""
        if not await self.ensure():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        snapshot = self._registry.snapshot
        info = snapshot.topics.get(OFFSETS_TOPIC)
        if info is None or not info.partitions:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        leader = snapshot.leader_for(OFFSETS_TOPIC, partition_for(group_id, len(info.partitions)))
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, leader
