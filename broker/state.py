"""The broker's shared state, handed to every request handler."""

from __future__ import annotations

from protocol.messages import ApiVersionsResponse

from .cluster.model import ClusterSnapshot
from .cluster.registry import ClusterRegistry
from .config import BrokerConfig
from .group.coordinator import GroupCoordinator
from .group.offsets_topic import OffsetsTopic
from .group.service import GroupService
from .group.storage import OffsetsLogStorage
from .handlers import HANDLERS
from .handlers.api_versions import advertised
from .log.manager import LogManager
from .metrics import BrokerMetrics
from .partitions import PartitionManager


class ProducerIds:
    """Hands out producer ids from blocks the cluster registry reserves, so no two
    brokers ever give the same id to two producers."""

    def __init__(self, registry: ClusterRegistry) -> None:
        self._registry = registry
        self._block: range = range(0)
        self._next = 0

    async def next(self) -> int:
        if self._next >= self._block.stop:
            self._block = await self._registry.allocate_producer_id_block()
            self._next = self._block.start
        pid = self._next
        self._next += 1
        return pid


class Broker:
    def __init__(
        self, config: BrokerConfig, registry: ClusterRegistry, logs: LogManager, metrics: BrokerMetrics | None = None
    ) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else BrokerMetrics()
        self.registry = registry
        self.logs = logs
        self.partitions = PartitionManager(config.broker_id, logs)
        self.producer_ids = ProducerIds(registry)
        self.groups = GroupService(
            GroupCoordinator(config.group), OffsetsLogStorage(self.partitions, lambda: registry.snapshot)
        )
        self.offsets_topic = OffsetsTopic(registry, config.group)
        self.api_versions: list[ApiVersionsResponse.ApiVersion] = advertised(HANDLERS)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    def snapshot(self) -> ClusterSnapshot:
        return self.registry.snapshot
