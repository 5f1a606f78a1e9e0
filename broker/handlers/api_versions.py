"""ApiVersions: the APIs and versions this broker handles."""

from __future__ import annotations

from collections.abc import Iterable

from tributary.broker.context import RequestContext
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ApiKey, ApiVersionsRequest, ApiVersionsResponse
from tributary.protocol.supported import SUPPORTED_VERSIONS


def advertised(handled: Iterable[ApiKey]) -> list[ApiVersionsResponse.ApiVersion]:
    """The supported ranges of the APIs this broker has handlers for."""
    keys = set(handled)
    return [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=versions.lo, max_version=versions.hi or versions.lo)
        for key, versions in sorted(SUPPORTED_VERSIONS.items())
        if key in keys
    ]


def unsupported_api_versions_response(ctx: RequestContext) -> ApiVersionsResponse:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and the supported ranges, so the client retries lower."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=ctx.broker.api_versions)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=ctx.broker.api_versions)
