"""Trio Kafka client: connections, metadata, producer, consumer with groups, admin,
raw-batch fetch/produce for the mirror, and a blocking fetcher for Spark executors.

May import: protocol, trio (see ../shared/DESIGN.md and the import-linter contracts).

Layering, bottom up (docs/client.md has the whole picture):

- sans-IO, no trio: ``errors``, ``config``, ``wire.versions`` (ApiVersions
  negotiation), ``wire.metadata`` (cluster snapshots), ``raw.batches`` (raw
  batches, fetch/produce/list-offsets requests and answers);
- Trio: ``wire`` (one pipelined broker connection; the cluster's metadata
  cache, connection pool and coordinators), ``producer``, ``consumer``,
  ``group`` (membership, offsets, assignors), ``admin``, ``raw`` (the mirror's
  raw batches);
- blocking, no trio: ``blocking`` (the Spark executors' fetcher).

The names below are imported lazily, on first use: ``import
tributary.client.blocking`` must not import trio, and importing a package runs
its ``__init__`` (so no sub-package ``__init__`` imports anything either).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tributary.client.admin.admin import Admin, NewTopic
    from tributary.client.blocking import BlockingFetcher
    from tributary.client.config import ClientConfig
    from tributary.client.consumer.consumer import Consumer
    from tributary.client.consumer.record import ConsumerRecord
    from tributary.client.errors import KafkaConnectionError, KafkaError
    from tributary.client.producer.producer import Producer, RecordHandle, RecordMetadata
    from tributary.client.raw.batches import EARLIEST, LATEST, ListedOffset, ProduceResult, RawBatches
    from tributary.client.raw.client import RawClient
    from tributary.client.wire.cluster import Cluster
    from tributary.client.wire.connection import BrokerConnection, connect
    from tributary.client.wire.metadata import ClusterMetadata, TopicPartition

_EXPORTS = {
    "EARLIEST": "raw.batches",
    "LATEST": "raw.batches",
    "Admin": "admin.admin",
    "BlockingFetcher": "blocking",
    "BrokerConnection": "wire.connection",
    "ClientConfig": "config",
    "Cluster": "wire.cluster",
    "ClusterMetadata": "wire.metadata",
    "Consumer": "consumer.consumer",
    "ConsumerRecord": "consumer.record",
    "KafkaConnectionError": "errors",
    "KafkaError": "errors",
    "ListedOffset": "raw.batches",
    "NewTopic": "admin.admin",
    "ProduceResult": "raw.batches",
    "Producer": "producer.producer",
    "RawBatches": "raw.batches",
    "RawClient": "raw.client",
    "RecordHandle": "producer.producer",
    "RecordMetadata": "producer.producer",
    "TopicPartition": "wire.metadata",
    "connect": "wire.connection",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "BlockingFetcher",
    "BrokerConnection",
    "ClientConfig",
    "Cluster",
    "ClusterMetadata",
    "Consumer",
    "ConsumerRecord",
    "KafkaConnectionError",
    "KafkaError",
    "ListedOffset",
    "NewTopic",
    "ProduceResult",
    "Producer",
    "RawBatches",
    "RawClient",
    "RecordHandle",
    "RecordMetadata",
    "TopicPartition",
    "connect",
]
