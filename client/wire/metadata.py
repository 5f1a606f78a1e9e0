"""The client's picture of a cluster, sans-IO: brokers, topics, partitions, leaders, controller.

:class:`ClusterMetadata` is an immutable snapshot built from a Metadata
response; the Trio :class:`~client.cluster.Cluster` replaces its snapshot on
every refresh, and the blocking fetcher keeps one of its own. Nothing here
imports trio.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import MetadataResponse
from tributary.protocol.primitives import NULL_UUID

#: ``leader`` of a partition that has none.
NO_LEADER = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    #: The leading broker's id, or :data:`NO_LEADER`.
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    #: The partition's error code in the response (LEADER_NOT_AVAILABLE, ...).
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    #: The topic's id (Metadata v10+), which the consumer group protocol names topics by;
    #: None when the broker did not say.
    topic_id: uuid.UUID | None = None

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


def _empty_mapping() -> Mapping[int, BrokerInfo]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None = None
    #: The controller's broker id, or None when the response named none.
    controller_id: int | None = None
    brokers: Mapping[int, BrokerInfo] = field(default_factory=_empty_mapping)
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: MappingProxyType({}))
    #: Topics asked for by name that the response answered with an error.
    topic_errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_response(cls, response: MetadataResponse, previous: ClusterMetadata | None = None) -> ClusterMetadata:
        """The snapshot a response describes. When ``previous`` is given, the
        response is taken to answer for the topics it names only (a refresh of
        some topics), and the other topics are kept from ``previous``."""
        topics: dict[str, TopicInfo] = dict(previous.topics) if previous is not None else {}
        errors: dict[str, int] = {}
        for t in response.topics:
            if t.name is None:
                continue
            # A topic being created may come back LEADER_NOT_AVAILABLE with its partitions listed.
            usable = not t.error_code or (t.error_code == ErrorCode.LEADER_NOT_AVAILABLE and t.partitions)
            if not usable:
                errors[t.name] = t.error_code
                topics.pop(t.name, None)
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id if p.leader_id >= 0 else NO_LEADER,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(p.offline_replicas),
                    error_code=p.error_code,
                )
                for p in t.partitions
            }
            topic_id = t.topic_id if t.topic_id != NULL_UUID else None
            topics[t.name] = TopicInfo(t.name, MappingProxyType(partitions), t.is_internal, topic_id)
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        return cls(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id if response.controller_id >= 0 else None,
            brokers=MappingProxyType(brokers),
            topics=MappingProxyType(topics),
            topic_errors=MappingProxyType(errors),
        )

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return info.partitions.get(partition) if info is not None else None

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader, or None when it is unknown or has none."""
        info = self.partition(topic, partition)
        return info.leader if info is not None and info.leader != NO_LEADER else None

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for the topics whose id the broker gave."""
        return {info.topic_id: name for name, info in self.topics.items() if info.topic_id is not None}

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, sorted; empty for an unknown topic."""
        info = self.topics.get(topic)
        return sorted(info.partitions) if info is not None else []


__all__ = ["NO_LEADER", "BrokerInfo", "ClusterMetadata", "PartitionInfo", "TopicInfo", "TopicPartition"]
