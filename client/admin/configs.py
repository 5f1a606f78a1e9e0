"""Config descriptions and changes, as DescribeConfigs and (Incremental)AlterConfigs carry them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    """Kafka's ConfigResource types (the ones a Tributary broker describes)."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    """Where a config's value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    #: Whether the value is the default (not set on the resource itself).
    is_default: bool
    read_only: bool = False
    is_sensitive: bool = False
    #: :class:`ConfigSource` when the broker reports it (DescribeConfigs v1+), else UNKNOWN.
    source: int = ConfigSource.UNKNOWN


__all__ = ["AlterConfigOp", "ConfigEntry", "ConfigSource", "ResourceType"]
