"""Trio Kafka client: connections, metadata, producer, consumer with groups, admin,
raw-batch fetch/produce for the mirror, and a blocking fetcher for Spark executors.

May import: protocol, trio (see ../shared/DESIGN.md and the import-linter contracts).

Layering, bottom up (docs/client.md has the whole picture):

- sans-IO, no trio: ``errors``, ``config``, ``versions`` (ApiVersions
  negotiation), ``metadata`` (cluster snapshots), ``batches`` (raw batches,
  fetch/produce/list-offsets requests and answers);
- Trio: ``connection`` (one pipelined broker connection), ``cluster``
  (metadata cache, connection pool, coordinators), ``admin``, ``raw``;
- blocking, no trio: ``blocking`` (the Spark executors' fetcher).

The names below are imported lazily, on first use: ``import client.blocking``
must not import trio, and importing a package runs its ``__init__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .admin import Admin, NewTopic
    from .batches import EARLIEST, LATEST, ListedOffset, ProduceResult, RawBatches
    from .blocking import BlockingFetcher
    from .cluster import Cluster
    from .config import ClientConfig
    from .connection import BrokerConnection, connect
    from .consumer import Consumer
    from .consumer_record import ConsumerRecord
    from .errors import KafkaConnectionError, KafkaError
    from .metadata import ClusterMetadata, TopicPartition
    from .producer import Producer, RecordHandle, RecordMetadata
    from .raw import RawClient

_EXPORTS = {
    "EARLIEST": "batches",
    "LATEST": "batches",
    "Admin": "admin",
    "BlockingFetcher": "blocking",
    "BrokerConnection": "connection",
    "ClientConfig": "config",
    "Cluster": "cluster",
    "ClusterMetadata": "metadata",
    "Consumer": "consumer",
    "ConsumerRecord": "consumer_record",
    "KafkaConnectionError": "errors",
    "KafkaError": "errors",
    "ListedOffset": "batches",
    "NewTopic": "admin",
    "ProduceResult": "batches",
    "Producer": "producer",
    "RawBatches": "batches",
    "RawClient": "raw",
    "RecordHandle": "producer",
    "RecordMetadata": "producer",
    "TopicPartition": "metadata",
    "connect": "connection",
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
