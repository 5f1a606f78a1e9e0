"""IncrementalAlterConfigs: set or delete single keys of a topic's config."""

from __future__ import annotations

import logging

from tributary.broker.context import RequestContext
from tributary.broker.topic_config_changes import authorization_error, change_or_refuse, incremental
from tributary.broker.topics import topic_defaults
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

log = logging.getLogger(__name__)


async def _alter(
    ctx: RequestContext, resource: IncrementalAlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> IncrementalAlterConfigsResponse.AlterConfigsResourceResponse:
    refused = authorization_error(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    code, message = refused or await change_or_refuse(
        ctx.broker, resource.resource_type, resource.resource_name,
        lambda: incremental(
            [(c.name, c.config_operation, c.value) for c in resource.configs], topic_defaults(ctx.broker.config.log)
        ),
        validate_only,
    )  # fmt: skip
    if code == ErrorCode.NONE and not validate_only:
        log.info("config of topic %s changed for %s", resource.resource_name, ctx.peer)
    return IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
        error_code=code, error_message=message, resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )  # fmt: skip


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[await _alter(ctx, r, request.validate_only) for r in request.resources]
    )
