"""Errors the cluster registry raises to the broker (which maps them to Kafka error codes)."""

from __future__ import annotations


class ClusterError(Exception):
    """Base of every error raised by broker.cluster."""


class RegistryNotRunningError(ClusterError):
    """An operation needs a running registry (inside `ClusterRegistry.run`)."""


class ZooKeeperUnavailableError(ClusterError):
    """ZooKeeper could not be reached in time."""


class BrokerIdInUseError(ClusterError):
    """Another live ZooKeeper session holds this broker id: two brokers were given the same id."""


class TopicExistsError(ClusterError):
    """The topic exists, or a request to create it is already pending."""


class UnknownTopicError(ClusterError):
    """No such topic."""


class InvalidPartitionsError(ClusterError):
    """The partition count is not a positive integer."""


class InvalidReplicaAssignmentError(ClusterError):
    """A requested replica assignment names a broker that is not alive, or is malformed."""


class InvalidReplicationFactorError(ClusterError):
    """The replication factor is below 1 or above the number of live brokers."""


class ControllerUnavailableError(ClusterError):
    """No controller acted on a request in time (none elected, or it is partitioned away)."""


class TopicCreationRejectedError(ClusterError):
    """The controller dropped a creation request it found invalid (e.g. brokers died meanwhile)."""
