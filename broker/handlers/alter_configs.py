"""AlterConfigs: replace a topic's whole config (keys not named go back to the default)."""

from __future__ import annotations

import logging

from tributary.broker.context import RequestContext
from tributary.broker.topic_config_changes import Refused, apply, replace_all
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AlterConfigsRequest, AlterConfigsResponse

log = logging.getLogger(__name__)


async def _alter(
    ctx: RequestContext, resource: AlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> AlterConfigsResponse.AlterConfigsResourceResponse:
    result = AlterConfigsResponse.AlterConfigsResourceResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
    try:
        change = replace_all([(c.name, c.value) for c in resource.configs])
        await apply(ctx.broker, resource.resource_type, resource.resource_name, change, validate_only)
    except Refused as exc:
        result.error_code, result.error_message = exc.code, str(exc)
        return result
    if not validate_only:
        log.info("config of topic %s replaced for %s", resource.resource_name, ctx.peer)
    return result


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[await _alter(ctx, r, request.validate_only) for r in request.resources])
