"""One module per Kafka API; each exposes ``async def handle(ctx, request)``.

A handler returns the response message, or None when the protocol says no
response is sent (Produce with acks=0). ``HANDLERS`` is also what the broker
advertises in ApiVersions: an API is advertised only once it is handled here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from protocol.messages import ApiKey

from ..context import RequestContext
from . import (
    api_versions,
    create_topics,
    delete_topics,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from .api_versions import unsupported_api_versions_response

Handler = Callable[[RequestContext, Any], Awaitable[Any]]

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
}

__all__ = ["HANDLERS", "Handler", "unsupported_api_versions_response"]
