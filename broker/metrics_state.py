"""Broker metrics read from the broker's state when Prometheus scrapes.

Log sizes, segment counts, groups and the ZooKeeper session are already
known to the broker; reading them at scrape time (on the trio thread, where
that state lives) costs nothing on the append or request path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tributary.broker.group.consumer_group import ConsumerGroupState
from tributary.broker.group.group import GroupState

if TYPE_CHECKING:
    from tributary.broker.state import Broker

#: The values of tributary_broker_zookeeper_session_state's ``state`` label.
ZK_STATES = ("connected", "suspended", "lost")


def zookeeper_state(connected: bool, session_id: int | None) -> str:
    """connected: a live session; suspended: the connection dropped but the
    session may still be resumed (ephemeral nodes still there); lost: no
    session (expired, or not yet or no longer opened)."""
    if connected:
        return "connected"
    return "suspended" if session_id is not None else "lost"


class BrokerStateCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._logs()
        yield from self._groups()
        yield from self._zookeeper()
        yield from self._request_budget()
        yield from self._replication()

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "tributary_broker_log_size_bytes", "Bytes in a partition log's segments", labels=labels
        )
        segments = GaugeMetricFamily("tributary_broker_log_segments", "Segments of a partition log", labels=labels)
        start = GaugeMetricFamily(
            "tributary_broker_log_start_offset", "First offset still in a partition log", labels=labels
        )
        end = GaugeMetricFamily(
            "tributary_broker_log_end_offset", "Offset the next record appended to a partition gets", labels=labels
        )
        storage_errors = CounterMetricFamily(
            "tributary_broker_log_storage_errors",
            "Appends and flushes of a partition log the disk failed (answered KAFKA_STORAGE_ERROR)",
            labels=labels,
        )
        storage_failing = GaugeMetricFamily(
            "tributary_broker_log_storage_failing",
            "1 while the disk under a partition log fails it (until an append or flush works again)",
            labels=labels,
        )
        for tp, partition_log in sorted(self._broker.logs.all_logs().items()):
            if partition_log.closed:
                continue
            key = [tp.topic, str(tp.partition)]
            size.add_metric(key, partition_log.size_in_bytes)
            segments.add_metric(key, len(partition_log.segments))
            start.add_metric(key, partition_log.log_start_offset)
            end.add_metric(key, partition_log.log_end_offset)
            storage_errors.add_metric(key, partition_log.storage_errors)
            storage_failing.add_metric(key, int(partition_log.storage_error is not None))
        offline = GaugeMetricFamily(
            "tributary_broker_log_offline",
            "1 for a partition whose flushed data does not read back: served KAFKA_STORAGE_ERROR, files untouched",
            labels=labels,
        )
        for tp in sorted(self._broker.logs.offline):
            offline.add_metric([tp.topic, str(tp.partition)], 1)
        yield from (size, segments, start, end, storage_errors, storage_failing, offline)

    def _groups(self) -> Iterator[Metric]:
        coordinator = self._broker.groups.coordinator
        by_state = Counter(group.state for group in coordinator.groups.values())
        groups = GaugeMetricFamily(
            "tributary_broker_groups", "Consumer groups this broker coordinates, by state", labels=["state"]
        )
        for state in GroupState:
            groups.add_metric([state.value], by_state[state])
        yield groups
        rebalances = CounterMetricFamily(
            "tributary_broker_group_rebalances",
            "Group rebalances on this coordinator since start: started (to PreparingRebalance) and completed "
            "(a new generation with members)",
            labels=["phase"],
        )
        rebalances.add_metric(["started"], coordinator.membership.rebalances_started)
        rebalances.add_metric(["completed"], coordinator.membership.rebalances_completed)
        yield rebalances
        consumer_states = Counter(group.state for group in coordinator.consumers.groups.values())
        consumer = GaugeMetricFamily(
            "tributary_broker_consumer_groups",
            "Consumer groups of the consumer protocol (KIP-848) this broker coordinates, by state",
            labels=["state"],
        )
        for consumer_state in ConsumerGroupState:
            consumer.add_metric([consumer_state.value], consumer_states[consumer_state])
        yield consumer
        yield CounterMetricFamily(
            "tributary_broker_consumer_group_rebalances",
            "Group epoch bumps of consumer-protocol groups since start (Kafka's consumer-group-rebalance count)",
            value=coordinator.consumers.epoch_bumps,
        )

    def _zookeeper(self) -> Iterator[Metric]:
        registry = self._broker.registry
        current = zookeeper_state(registry.connected, registry.session_id)
        state = GaugeMetricFamily(
            "tributary_broker_zookeeper_session_state",
            "The broker's ZooKeeper session: 1 for the state it is in (connected, suspended, lost), 0 for the others",
            labels=["state"],
        )
        for name in ZK_STATES:
            state.add_metric([name], 1.0 if name == current else 0.0)
        yield state
        yield GaugeMetricFamily(
            "tributary_broker_controller",
            "1 while this broker is the cluster's controller",
            value=registry.is_controller,
        )

    def _request_budget(self) -> Iterator[Metric]:
        budget = self._broker.request_budget
        yield GaugeMetricFamily(
            "tributary_broker_queued_request_bytes",
            "Bytes of requests read (or being read) but not yet answered, against queued.max.request.bytes",
            value=budget.used,
        )
        yield GaugeMetricFamily(
            "tributary_broker_connections_throttled",
            "Connections not being read because of queued.max.request.bytes: it is spent, or they hold "
            "their share of it",
            value=budget.throttled,
        )

    def _replication(self) -> Iterator[Metric]:
        """Kafka's ReplicaManager and controller gauges, under their Kafka names in the help."""
        broker = self._broker
        snapshot = broker.snapshot()
        led = [(p, p.leader_state) for p in broker.partitions.local() if p.leader_state is not None]
        under_replicated = sum(1 for p, state in led if len(state.isr) < len(p.replicas))
        under_min_isr = 0
        lag = GaugeMetricFamily(
            "tributary_broker_replica_lag_messages",
            "Messages a follower is behind this leader's log end (Kafka's replica fetch lag, seen by the leader)",
            labels=["topic", "partition", "replica"],
        )
        for p, state in led:
            info = snapshot.topics.get(p.topic)
            override = None if info is None else info.config.get("min.insync.replicas")
            default = broker.config.replication.min_insync_replicas
            minimum = int(override) if override and override.isdigit() else default
            if len(state.isr) < minimum:
                under_min_isr += 1
            for replica, behind in sorted(state.follower_lag(p.log.log_end_offset).items()):
                lag.add_metric([p.topic, str(p.index), str(replica)], behind)
        yield GaugeMetricFamily(
            "tributary_broker_leader_partitions", "Partitions this broker leads (LeaderCount)", len(led)
        )
        yield GaugeMetricFamily(
            "tributary_broker_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set (UnderReplicatedPartitions)",
            under_replicated,
        )
        yield GaugeMetricFamily(
            "tributary_broker_under_min_isr_partitions",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas (UnderMinIsrPartitionCount)",
            under_min_isr,
        )
        offline = 0
        if broker.registry.is_controller:
            offline = sum(1 for t in snapshot.topics.values() for s in t.partitions.values() if not s.online)
        yield GaugeMetricFamily(
            "tributary_broker_offline_partitions",
            "Partitions with no live leader, counted by the controller only (OfflinePartitionsCount)",
            offline,
        )
        yield lag
