"""DescribeConfigs: a topic's configs (its overrides, else the broker's defaults),
or this broker's whole configuration.

Resource types are Kafka's: 2 = topic, 4 = broker (named by its id; "" asks
for the cluster default, answered the same way since every broker of a
Tributary cluster takes its defaults from its own TOML). A broker is described
by every setting it reads, with its source (its file or flags, or the default)
and its type; a password-like setting is sensitive and its value null
(``broker_config_entries``).
"""

from __future__ import annotations

from tributary.broker.broker_config_entries import BrokerConfigEntry, broker_config_entries
from tributary.broker.context import RequestContext
from tributary.broker.topic_config_changes import authorization_error
from tributary.broker.topics import ConfigEntry, describe_topic_config
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse

TOPIC = 2
BROKER = 4

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult


def _entry(entry: ConfigEntry | BrokerConfigEntry, *, read_only: bool, synonyms: bool) -> Entry:
    sensitive = isinstance(entry, BrokerConfigEntry) and entry.sensitive
    return Entry(
        name=entry.name,
        value=entry.value,
        read_only=read_only,
        is_default=entry.is_default,
        config_source=entry.source,
        is_sensitive=sensitive,
        synonyms=[DescribeConfigsResponse.DescribeConfigsSynonym(entry.name, entry.value, entry.source)]
        if synonyms
        else [],
        config_type=entry.config_type,
        documentation=None,
    )


def _describe(ctx: RequestContext, resource: DescribeConfigsRequest.DescribeConfigsResource, synonyms: bool) -> Result:
    broker = ctx.broker
    result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name)  # fmt: skip
    refused = authorization_error(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
    if refused is not None:
        result.error_code, result.error_message = refused
        return result
    if resource.resource_type == TOPIC:
        info = broker.snapshot().topics.get(resource.resource_name)
        if info is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"topic {resource.resource_name!r} does not exist"
            return result
        entries: list[ConfigEntry] | list[BrokerConfigEntry] = describe_topic_config(info.config, broker.config.log)
        read_only = False
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.broker_id)):
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"this is broker {broker.broker_id}, not {resource.resource_name}"
            return result
        entries = broker_config_entries(broker.config)
        read_only = True
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = (
            f"resource type {resource.resource_type} is not supported: only topics (2) and brokers (4)"
        )
        return result
    keys = resource.configuration_keys
    result.configs = [
        _entry(e, read_only=read_only, synonyms=synonyms) for e in entries if keys is None or e.name in keys
    ]
    return result


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[_describe(ctx, r, request.include_synonyms) for r in request.resources])
