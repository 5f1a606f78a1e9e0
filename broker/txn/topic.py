"""``__transaction_state`` in the cluster: created on first need, as Kafka does when a client
first looks for a transaction coordinator, and where a transactional id's coordinator is."""

from __future__ import annotations

import contextlib
import logging

import trio

from tributary.broker.cluster.errors import ClusterError, TopicExistsError
from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.txn.config import TxnConfig
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC, partition_for
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

#: How long a FindCoordinator waits for the topic to be created before answering
#: COORDINATOR_NOT_AVAILABLE (the client then asks again).
CREATE_TIMEOUT_S = 10.0


def transaction_state_config(config: TxnConfig, replication_factor: int) -> dict[str, str]:
    """The topic's configs, as Kafka sets them: compacted (the log cleaner keeps the last state of
    each id), and ``min.insync.replicas`` from ``transaction.state.log.min.isr`` (at most the
    replication factor, or no state could ever be written)."""
    return {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(min(config.state_log_min_isr, replication_factor)),
        "segment.bytes": str(config.state_log_segment_bytes),
    }


class TransactionStateTopic:
    def __init__(self, registry: ClusterRegistry, config: TxnConfig) -> None:
        self._registry = registry
        self._config = config
        # One creation at a time from this broker; the others wait and find the topic.
        self._lock = trio.Lock()

    async def ensure(self) -> bool:
        """Creates the topic if it does not exist yet; whether it exists now."""
        if TRANSACTION_STATE_TOPIC in self._registry.snapshot.topics:
            return True
        async with self._lock:
            if TRANSACTION_STATE_TOPIC in self._registry.snapshot.topics:
                return True
            config = self._config
            wanted = config.state_log_replication_factor
            live = len(self._registry.snapshot.brokers)
            replication_factor = max(1, min(wanted, live))
            if replication_factor < wanted:
                log.warning(
                    "creating %s with replication factor %d: transaction.state.log.replication.factor is %d but "
                    "only %d brokers are alive", TRANSACTION_STATE_TOPIC, replication_factor, wanted, live,
                )  # fmt: skip
            if config.state_log_min_isr > replication_factor:
                log.warning(
                    "creating %s with min.insync.replicas %d: transaction.state.log.min.isr is %d, above its "
                    "replication factor", TRANSACTION_STATE_TOPIC, replication_factor, config.state_log_min_isr,
                )  # fmt: skip
            try:
                await self._registry.create_topic(
                    TRANSACTION_STATE_TOPIC,
                    config.state_log_partitions,
                    transaction_state_config(config, replication_factor),
                    replication_factor=replication_factor,
                    timeout=CREATE_TIMEOUT_S,
                )
                log.info("created %s with %d partitions, replication factor %d", TRANSACTION_STATE_TOPIC,
                         config.state_log_partitions, replication_factor)  # fmt: skip
            except TopicExistsError:
                with contextlib.suppress(TimeoutError):
                    await self._registry.wait_for(lambda s: TRANSACTION_STATE_TOPIC in s.topics, CREATE_TIMEOUT_S)
            except (ClusterError, TimeoutError) as exc:
                log.warning("creating %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
        return TRANSACTION_STATE_TOPIC in self._registry.snapshot.topics

    async def coordinator_for(self, transactional_id: str) -> tuple[ErrorCode, BrokerInfo | None]:
        """The leader of the id's partition, or COORDINATOR_NOT_AVAILABLE."""
        if not await self.ensure():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        snapshot = self._registry.snapshot
        info = snapshot.topics.get(TRANSACTION_STATE_TOPIC)
        if info is None or not info.partitions:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        leader = snapshot.leader_for(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, len(info.partitions)))
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, leader
