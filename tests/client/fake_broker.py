"""A tiny in-process broker speaking real protocol bytes over a trio stream.

Only for what our real broker cannot be made to do: refuse ApiVersions v3,
answer out of order, never answer, or hang up mid-request. Everything else is
tested against real brokers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import RequestEnvelope, decode_request_body, decode_request_header, encode_response
from tributary.protocol.messages import ApiKey, ApiVersionsResponse
from tributary.protocol.supported import SUPPORTED_VERSIONS

Handler = Callable[[RequestEnvelope, Any], Awaitable[Any]]


class HangUp(Exception):
    """Raised by a handler: the fake broker closes the connection."""


def default_ranges() -> dict[int, tuple[int, int]]:
    return {int(k): (v.lo, v.hi if v.hi is not None else v.lo) for k, v in SUPPORTED_VERSIONS.items()}


@dataclass
class FakeBroker:
    ranges: dict[int, tuple[int, int]] = field(default_factory=default_ranges)
    #: The highest ApiVersions version it understands; above it, a v0 UNSUPPORTED_VERSION body.
    max_api_versions: int = 3
    handlers: dict[int, Handler] = field(default_factory=dict)
    #: (api key, version, correlation id) of every request received, in order.
    seen: list[tuple[int, int, int]] = field(default_factory=list)
    #: Per-request answers may be delayed by handlers; they are sent in arrival order
    #: unless ``in_order`` is false.
    in_order: bool = True
    _send_lock: trio.Lock = field(default_factory=trio.Lock)

    def _api_keys(self) -> list[ApiVersionsResponse.ApiVersion]:
        return [
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in self.ranges.items()
        ]

    async def serve(self, stream: trio.abc.Stream) -> None:
        """Answer requests until the client closes or a handler hangs up."""
        answers_send, answers_receive = trio.open_memory_channel[trio.Event | None](1000)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, stream, nursery, answers_send)
        except* (HangUp, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            answers_receive.close()
            await stream.aclose()

    async def _read(self, stream: trio.abc.Stream, nursery: trio.Nursery, answers: Any) -> None:
        decoder = FrameDecoder()
        previous = trio.Event()
        previous.set()
        while data := await stream.receive_some(65536):
            decoder.feed(data)
            for frame in decoder.frames():
                envelope = decode_request_header(frame)
                self.seen.append((envelope.api_key, envelope.api_version, envelope.correlation_id))
                done = trio.Event()
                nursery.start_soon(self._answer, stream, envelope, frame, previous, done)
                previous = done
        raise HangUp

    async def _answer(
        self, stream: trio.abc.Stream, envelope: RequestEnvelope, frame: bytes, previous: trio.Event, done: trio.Event
    ) -> None:
        try:
            response = await self._respond(envelope, frame)
            if self.in_order:
                await previous.wait()
            if response is not None:
                async with self._send_lock:
                    await stream.send_all(response)
        finally:
            done.set()

    async def _respond(self, envelope: RequestEnvelope, frame: bytes) -> bytes | None:
        cid = envelope.correlation_id
        if envelope.api_key == ApiKey.API_VERSIONS:
            if envelope.api_version > self.max_api_versions:
                body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self._api_keys())
                return encode_response(body, 0, cid)
            return encode_response(ApiVersionsResponse(api_keys=self._api_keys()), envelope.api_version, cid)
        handler = self.handlers.get(envelope.api_key)
        if handler is None:
            raise HangUp
        request = decode_request_body(envelope, frame)
        response = await handler(envelope, request)
        if response is None:
            return None
        if isinstance(response, bytes):
            return response
        return encode_response(response, envelope.api_version, cid)
