"""ApiVersions: the APIs and versions this broker handles."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ApiVersionsRequest, ApiVersionsResponse


def unsupported_api_versions_response(ctx: RequestContext) -> ApiVersionsResponse:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and the supported ranges, so the client retries lower."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=ctx.broker.api_versions)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=ctx.broker.api_versions)
