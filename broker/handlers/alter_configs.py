"""AlterConfigs: replace a topic's whole config (keys not named go back to the default)."""

from __future__ import annotations

import logging

from tributary.broker.context import RequestContext
from tributary.broker.topic_config_changes import authorization_error, change_or_refuse, replace_all
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AlterConfigsRequest, AlterConfigsResponse

log = logging.getLogger(__name__)


async def _alter(
    ctx: RequestContext, resource: AlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> AlterConfigsResponse.AlterConfigsResourceResponse:
    refused = authorization_error(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    code, message = refused or await change_or_refuse(
        ctx.broker, resource.resource_type, resource.resource_name,
        lambda: replace_all([(c.name, c.value) for c in resource.configs]), validate_only,
    )  # fmt: skip
    if code == ErrorCode.NONE and not validate_only:
        log.info("config of topic %s replaced for %s", resource.resource_name, ctx.peer)
    return AlterConfigsResponse.AlterConfigsResourceResponse(
        error_code=code, error_message=message, resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )  # fmt: skip


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[await _alter(ctx, r, request.validate_only) for r in request.resources])
