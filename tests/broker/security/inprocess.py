"""A real broker in this process, asked requests as any principal from any host.

Until the connection itself establishes who a client is (SASL, client certificates), the only way
to put several principals in front of a broker is to hand its dispatcher a ``RequestContext``
naming one. Everything below the connection is the broker's own: the registry in ZooKeeper, the
logs on disk, the group coordinator, the ACL store with its watches (``server.start_services``
starts them as ``tributary broker`` does), the dispatcher and every handler; requests and responses
go through the codec as bytes.

The broker runs in a trio loop on a thread of its own, so that the synchronous tests of a module
share one (starting a broker takes a second or two): :meth:`InProcessBroker.request` hands a
request to that loop and waits for the answer.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from tributary.broker import server
from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.config import load
from tributary.broker.context import RequestContext
from tributary.broker.dispatch import advertised_versions, respond
from tributary.broker.log.manager import LogManager
from tributary.broker.security.principal import KafkaPrincipal
from tributary.broker.state import Broker
from tributary.broker.transport import send_parts
from tributary.protocol.headers import decode_request_header, decode_response, encode_request
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.ports import free_port

T = TypeVar("T")
START_TIMEOUT = 30.0


class _Collected(trio.abc.SendStream):
    """Where a response is "sent": its bytes, file regions read back."""

    def __init__(self) -> None:
        self.data = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class InProcessBroker:
    """``with InProcessBroker(zookeeper, data_dir, {"super.users": "User:admin"}) as broker:``"""

    def __init__(self, zookeeper: str, data_dir: Path, settings: dict[str, Any] | None = None, broker_id: int = 1):
        port = free_port()  # advertised, never listened on: requests come through ``request``
        self.config = load(
            {"id": broker_id, "listen": f"127.0.0.1:{port}", "data-dir": str(data_dir), "zookeeper": zookeeper,
             **(settings or {})}
        )  # fmt: skip
        self.broker: Broker | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="in-process-broker", daemon=True)
        self._correlation = itertools.count(1)

    def __enter__(self) -> InProcessBroker:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT) or self.broker is None:
            raise RuntimeError(f"the in-process broker did not start: {self._failure!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(START_TIMEOUT)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported by __enter__ or the next call
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        config = self.config
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        logs = await trio.to_thread.run_sync(lambda: LogManager(config.data_dir, config.log))
        registry = ClusterRegistry(
            config.zookeeper,
            BrokerInfo(config.broker_id, config.advertise.host, config.advertise.port, config.datacenter),
            session_timeout=config.zookeeper_session_timeout_ms / 1000,
        )
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(registry.run)
                broker = Broker(config, registry, logs, advertised_versions())
                await server.start_services(broker, nursery)
                self.broker = broker
                self._ready.set()
                await self._stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            await trio.to_thread.run_sync(logs.close)

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in the broker's loop and return what it returns."""
        if self._failure is not None or self._token is None:
            raise RuntimeError(f"the in-process broker is not running: {self._failure!r}")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def request(
        self, principal: KafkaPrincipal | str, body: Any, version: int | None = None, host: str = "10.0.0.7"
    ) -> Any:
        """``body`` sent by ``principal`` from ``host``, at ``version`` (default: the newest the
        broker serves); the decoded response (None for an acks=0 produce)."""
        who = principal if isinstance(principal, KafkaPrincipal) else KafkaPrincipal.parse(principal)
        api_key = body.SPEC.api_key
        supported = SUPPORTED_VERSIONS[api_key]
        if version is None:
            version = supported.hi if supported.hi is not None else supported.lo
        frame = encode_request(body, version, next(self._correlation), "acl-test")[4:]
        broker = self.broker
        assert broker is not None

        async def exchange() -> bytes | None:
            ctx = RequestContext(broker, decode_request_header(frame), f"{host}:50000", principal=who)
            try:
                parts = await respond(ctx, frame)
                if parts is None:
                    return None
                out = _Collected()
                await send_parts(out, parts, sendfile=False)
                return bytes(out.data)
            finally:
                for release in ctx.after_send:
                    release()

        data = self.call(exchange)
        if data is None:
            return None
        _, response = decode_response(api_key, version, data[4:])
        return response
