"""A follower's connection to a leader: one request at a time, Kafka's wire format.

The broker may not import the client package (the layering keeps the broker standing on the
protocol alone), and a replica fetcher needs very little of it: it sends one Fetch, waits for the
answer, appends, and sends the next. So this is a plain request/response loop over a trio stream.
A broken stream, a bad frame or a correlation id that does not match raises `ChannelError`; the
fetcher reconnects.
"""

from __future__ import annotations

import ssl
from typing import Any

import trio

from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.security.config import InterBrokerClient
from tributary.broker.security.sasl_client import SaslLoginError, login
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
    async def connect(
        cls,
        broker: BrokerInfo,
        client_id: str,
        max_frame_size: int,
        security: InterBrokerClient | None = None,
        *,
        timeout: float = 30.0,
    ) -> BrokerChannel:
        """A channel to ``broker`` on the inter-broker listener: TLS and a SASL login as that
        listener's protocol says (``security``; None: the registration's address, in plain text)."""
        address = broker.address(security.listener) if security is not None else (broker.host, broker.port)
        if address is None:
            assert security is not None
            raise ChannelError(f"broker {broker.id} has no listener {security.listener} (inter.broker.listener.name)")
        host, port = address
        stream: trio.abc.Stream
        try:
            with trio.fail_after(timeout):
                stream = await trio.open_tcp_stream(host, port)
                if security is not None and security.tls is not None:
                    tls = trio.SSLStream(stream, security.tls.client_context, server_hostname=host)
                    stream = tls
                    await tls.do_handshake()
        except (OSError, trio.BrokenResourceError, trio.TooSlowError) as exc:
            reason = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            raise ChannelError(f"cannot connect to broker {broker.id} at {host}:{port}: {reason}") from exc
        channel = cls(stream, client_id, max_frame_size)
        if security is not None and security.username is not None and security.password is not None:
            try:
                with trio.fail_after(timeout):
                    await login(
                        lambda body, version: channel.request(body, version, timeout),
                        security.mechanism,
                        security.username,
                        security.password,
                    )
            except (SaslLoginError, trio.TooSlowError) as exc:
                await channel.aclose()
                raise ChannelError(
                    f"broker {broker.id} refused the login of user {security.username!r} ({security.mechanism}): {exc}"
                ) from exc
            except ChannelError:
                await channel.aclose()
                raise
        return channel

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
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError, ProtocolError) as exc:
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
