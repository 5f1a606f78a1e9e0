"""Applying AlterConfigs and IncrementalAlterConfigs to a topic's stored config.

Both requests name resources (2 = topic, 4 = broker) and configs; this module
turns one resource's entries into the function the cluster registry applies
to the current config in a compare-and-set, and says why a request is refused.
Broker configs are static (the broker's TOML), so altering them is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tributary.broker.cluster.errors import ClusterError, UnknownTopicError
from tributary.broker.topics import topic_config_error
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from tributary.broker.context import RequestContext
    from tributary.broker.state import Broker

TOPIC = 2
BROKER = 4
# IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Change = Callable[[Mapping[str, str]], Mapping[str, str]]


class Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def authorization_error(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> tuple[ErrorCode, str] | None:
    """Kafka's checks for DescribeConfigs and (Incremental)AlterConfigs: a topic's configs need the
    operation on the topic, a broker's on the Cluster. None when allowed (or another type: the
    handler refuses it)."""
    if resource_type == TOPIC and not ctx.authorize(operation, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"{operation.kafka_name} on the topic"
    if resource_type == BROKER and not ctx.authorize_cluster(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{operation.kafka_name} on the Cluster"
    return None


def replace_all(entries: Sequence[tuple[str, str | None]]) -> Change:
    """AlterConfigs: the entries become the whole config (null values are left out)."""
    wanted = {name: value for name, value in entries if value is not None}
    return lambda _current: wanted


#: Topic configs whose value is a comma-separated list: APPEND and SUBTRACT act on them.
LIST_CONFIGS = frozenset({"cleanup.policy"})


def _items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def incremental(entries: Sequence[tuple[str, int, str | None]], defaults: Mapping[str, str] | None = None) -> Change:
    """IncrementalAlterConfigs: SET and DELETE per key; APPEND and SUBTRACT add items to or
    remove them from a list config (``cleanup.policy``), starting, as Kafka does, from the
    topic's value or else the broker's default (``defaults``)."""
    for name, operation, _ in entries:
        if operation in (APPEND, SUBTRACT) and name not in LIST_CONFIGS:
            raise Refused(ErrorCode.INVALID_CONFIG, f"{name}: APPEND and SUBTRACT apply to list configs only")
        if operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise Refused(ErrorCode.INVALID_REQUEST, f"{name}: unknown config operation {operation}")
    if len({name for name, _, _ in entries}) != len(entries):
        raise Refused(ErrorCode.INVALID_REQUEST, "a config is named twice")

    def change(current: Mapping[str, str]) -> Mapping[str, str]:
        result = dict(current)
        for name, operation, value in entries:
            if operation in (APPEND, SUBTRACT):
                items = _items(result.get(name, (defaults or {}).get(name)))
                for item in _items(value):
                    if operation == APPEND and item not in items:
                        items.append(item)
                    elif operation == SUBTRACT and item in items:
                        items.remove(item)
                result[name] = ",".join(items)  # an empty list is then refused as a value
            elif operation == DELETE or value is None:
                result.pop(name, None)
            else:
                result[name] = value
        return result

    return change


async def apply(broker: Broker, resource_type: int, name: str, change: Change, validate_only: bool) -> None:
    """Validate and (unless ``validate_only``) store the change; raises Refused."""
    if resource_type == BROKER:
        raise Refused(ErrorCode.INVALID_REQUEST, "broker configs are static: set them in the broker's TOML file")
    if resource_type != TOPIC:
        raise Refused(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported")
    info = broker.snapshot().topics.get(name)
    if info is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    # Validated against the config as it is now; the stored change applies to the newest one.
    if (why := topic_config_error(dict(change(info.config)))) is not None:
        raise Refused(ErrorCode.INVALID_CONFIG, why)
    if validate_only:
        return

    def checked(current: Mapping[str, str]) -> Mapping[str, str]:
        wanted = change(current)
        if (why := topic_config_error(dict(wanted))) is not None:
            raise Refused(ErrorCode.INVALID_CONFIG, why)
        return wanted

    try:
        await broker.registry.alter_topic_config(name, checked)
    except UnknownTopicError as exc:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc)) from exc
    except ClusterError as exc:
        raise Refused(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from exc


async def change_or_refuse(
    broker: Broker, resource_type: int, name: str, build: Callable[[], Change], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """AlterConfigs' and IncrementalAlterConfigs' answer for one resource: (NONE, None) once
    the change built by ``build`` is applied (or only checked), else the refusal's code and why."""
    try:
        await apply(broker, resource_type, name, build(), validate_only)
    except Refused as exc:
        return exc.code, str(exc)
    return ErrorCode.NONE, None
