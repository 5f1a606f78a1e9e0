"""The broker's shared state, handed to every request handler."""

from __future__ import annotations

import logging
import re

import trio

from tributary.broker.auto_create import AutoCreatePolicy
from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.config import BrokerConfig
from tributary.broker.connection_limits import RateLimitedLog
from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.offsets_topic import OffsetsTopic
from tributary.broker.group.service import GroupService
from tributary.broker.group.storage import OffsetsLogStorage
from tributary.broker.log.manager import LogManager
from tributary.broker.metrics import BrokerMetrics
from tributary.broker.partitions import Partition, PartitionManager
from tributary.broker.replication.manager import ReplicaManager
from tributary.broker.request_budget import RequestBudget
from tributary.broker.security.acl_authorizer import AclAuthorizer
from tributary.broker.security.credentials import CredentialCache
from tributary.broker.txn.coordinator import TransactionCoordinator
from tributary.broker.txn.markers import Marker, MarkerSender, write_markers
from tributary.broker.txn.messages import TopicPartition
from tributary.broker.txn.service import TxnService
from tributary.broker.txn.storage import TxnLogStorage
from tributary.broker.txn.topic import TransactionStateTopic
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ApiVersionsResponse

#: At most AUTH_LOG_BURST log lines per listener and failure reason every AUTH_LOG_INTERVAL
#: seconds (the metric counts them all).
AUTH_LOG_INTERVAL = 10.0
AUTH_LOG_BURST = 20


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
        self,
        config: BrokerConfig,
        registry: ClusterRegistry,
        logs: LogManager,
        api_versions: list[ApiVersionsResponse.ApiVersion],
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else BrokerMetrics()
        self.registry = registry
        self.logs = logs
        fsync = config.replication.high_watermark_fsync
        self.partitions = PartitionManager(
            config.broker_id,
            logs,
            self._registration_epoch,
            durable=self._request_flush if fsync else None,
        )
        self.replicas = ReplicaManager(
            config.broker_id,
            self.partitions,
            registry,
            config.replication,
            self.metrics.isr_changed,
            inter_broker=config.security.inter_broker,
        )
        self.producer_ids = ProducerIds(registry)
        self.groups = GroupService(
            GroupCoordinator(config.group), OffsetsLogStorage(self.partitions, lambda: registry.snapshot)
        )
        self.offsets_topic = OffsetsTopic(registry, config.group)
        txn = config.txn
        self.transactions = TxnService(
            TransactionCoordinator(txn),
            TxnLogStorage(self.partitions, lambda: registry.snapshot, txn.state_log_min_isr),
            self.producer_ids.next,
        )
        self.transactions.markers = MarkerSender(
            registry,
            self.partitions,
            write_local=self.write_markers,
            current=self.transactions.is_current,
            done=self.transactions.marker_written,
            abandoned=self.transactions.markers_abandoned,
            timeout_s=txn.write_timeout_ms / 1000,
            backoff_s=txn.marker_retry_backoff_ms / 1000,
            inter_broker=config.security.inter_broker,
        )
        self.transaction_topic = TransactionStateTopic(registry, txn)
        self.auto_create = AutoCreatePolicy(
            config.auto_create_max_partitions,
            config.auto_create_max_per_second,
            re.compile(config.auto_create_deny_pattern) if config.auto_create_deny_pattern else None,
        )
        # What ApiVersions answers: the dispatcher's routes, handed down by the server.
        self.api_versions = api_versions
        # Request bytes read but not yet answered, shared by every connection.
        self.request_budget = RequestBudget(config.queued_max_request_bytes)
        # Users' SCRAM credentials, followed in ZooKeeper (the server starts it).
        self.credentials = CredentialCache()
        # Failed authentications are logged, at most AUTH_LOG_BURST lines per listener and
        # reason every AUTH_LOG_INTERVAL seconds: a password-guessing client must not flood the log.
        self.auth_log = RateLimitedLog(
            logging.getLogger("tributary.broker.security"), AUTH_LOG_INTERVAL, trio.current_time, burst=AUTH_LOG_BURST
        )
        # What every handler asks before it acts; ACLs in ZooKeeper when authorizer.class.name is set.
        self.authorizer = AclAuthorizer(
            config.authorizer,
            config.zookeeper,
            session_timeout=config.zookeeper_session_timeout_ms / 1000,
            registry=self.metrics.registry,
        )

    async def write_markers(self, marker: Marker, targets: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Append a transaction's marker to the partitions of ``targets`` this broker leads
        (WriteTxnMarkers, from another broker's coordinator or this one's)."""
        return await write_markers(
            self.partitions,
            self.snapshot(),
            marker,
            targets,
            default_min_insync=self.config.replication.min_insync_replicas,
            timeout_s=self.config.txn.write_timeout_ms / 1000,
            on_offsets_marker=self.groups.complete_txn,
        )

    def _request_flush(self, partition: Partition) -> None:
        # Resolved at call time: the replica manager is made after the partition manager.
        self.replicas.request_flush(partition)

    def _registration_epoch(self) -> int:
        me = self.registry.snapshot.brokers.get(self.config.broker_id)
        return -1 if me is None else me.epoch

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    def snapshot(self) -> ClusterSnapshot:
        return self.registry.snapshot
