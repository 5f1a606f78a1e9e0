"""A follower's connection to a leader: one request at a time, Kafka's wire format.

The broker may not import the client package (the layering keeps the broker standing on the
protocol alone), and a replica fetcher needs very little of it: it sends one Fetch, waits for the
answer, appends, and sends the next. So this is a plain request/response loop over a trio stream.
A broken stream, a bad frame or a correlation id that does not match raises `ChannelError`; the
fetcher reconnects.
"""

from __future__ import annotations

from typing import Any

import trio

from tributary.protocol.errors import ProtocolError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.schema import Declared

RECEIVE_CHUNK = 256 * 1024


class ChannelError(Exception):
    """The connection to the leader failed; open a new one."""


class BrokerChannel:
    def __init__(self, stream: trio.abc.Stream, client_id: str, max_frame_size: int) -> None:
        self._stream = stream
        self._client_id = client_id
        self._decoder = FrameDecoder(max_frame_size)
        self._correlation_id = 0

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str, max_frame_size: int) -> BrokerChannel:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise ChannelError(f"cannot connect to {host}:{port}: {exc}") from exc
        return cls(stream, client_id, max_frame_size)

    async def request(self, body: Declared, version: int, timeout: float) -> Any:
        """Send `body` at `version` and return the decoded response body."""
        self._correlation_id += 1
        correlation_id = self._correlation_id
        api_key = type(body).SPEC.api_key
        assert api_key is not None
        with trio.move_on_after(timeout) as scope:
            try:
                await self._stream.send_all(encode_request(body, version, correlation_id, self._client_id))
                frame = await self._receive_frame()
                answered, response = decode_response(api_key, version, frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError) as exc:
                raise ChannelError(f"{type(exc).__name__}: {exc}") from exc
        if scope.cancelled_caught:
            raise ChannelError(f"no response within {timeout:g} s")
        if answered != correlation_id:
            raise ChannelError(f"response to correlation id {answered}, expected {correlation_id}")
        return response

    async def _receive_frame(self) -> bytes:
        decoder = self._decoder
        while (frame := decoder.next_frame()) is None:
            data = await self._stream.receive_some(max(RECEIVE_CHUNK, decoder.missing))
            if not data:
                raise ChannelError("the leader closed the connection")
            decoder.feed(data)
        return frame

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stream.aclose()
