"""The console's server: samples the appliance, audits it now and then, and serves the page.

Three tasks in one nursery: one collects the appliance's status every ``sample_interval``
seconds (and the mirrors' lag into the hour-long history), one runs the audit of the last
``audit_hours`` every ``audit_interval`` seconds, and one answers HTTP: ``/`` is the page,
``/status.json`` the same as data. The HTTP side is the least a browser needs (one GET per
connection, no keep-alive), so no web framework is pulled into the appliance.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import trio

from tributary.client.errors import KafkaError
from tributary.deploy.appliance.probe import split_address
from tributary.deploy.appliance.status import Status, collect
from tributary.deploy.appliance.topology import Topology
from tributary.deploy.audit.collect import AuditError
from tributary.deploy.audit.collect import collect as collect_audit
from tributary.deploy.audit.model import HOUR_MS, audit
from tributary.deploy.console.history import LagHistory
from tributary.deploy.console.page import AuditView, render

log = logging.getLogger(__name__)

#: What a request may send before its blank line, and how long it may take.
MAX_REQUEST_HEAD = 16 * 1024
REQUEST_TIMEOUT = 10.0


class Console:
    def __init__(
        self,
        topology: Topology,
        *,
        sample_interval: float = 2.0,
        audit_interval: float = 60.0,
        audit_hours: int = 24,
        timeout: float = 3.0,
    ) -> None:
        self.topology = topology
        self.sample_interval = sample_interval
        self.audit_interval = audit_interval
        self.audit_hours = audit_hours
        self.timeout = timeout
        self.status: Status | None = None
        self.audit: AuditView | None = None
        self.lag = LagHistory()
        self.address: tuple[str, int] | None = None

    async def run(
        self, listen: str, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve on ``listen`` (HOST:PORT; port 0 picks one) until cancelled;
        ``task_status.started((host, port))`` once listening."""
        host, port = split_address(listen)
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound = listeners[0].socket.getsockname()
        self.address = (bound[0], bound[1])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sample)
            nursery.start_soon(self._audit)
            await nursery.start(trio.serve_listeners, self._serve, listeners)
            task_status.started(self.address)

    async def _sample(self) -> None:
        while True:
            status = await collect(self.topology, self.timeout)
            self.status = status
            self.lag.add(time.time(), {m.alias: m.lag_seconds for m in status.mirrors})
            await trio.sleep(self.sample_interval)

    async def _audit(self) -> None:
        while True:
            end_ms = int(time.time() * 1000)
            start_ms = end_ms - end_ms % HOUR_MS - (self.audit_hours - 1) * HOUR_MS
            try:
                streams = await collect_audit(self.topology, start_ms, end_ms, self.timeout * 3)
            except (AuditError, KafkaError, OSError, trio.TooSlowError) as exc:
                self.audit = AuditView((), start_ms, end_ms, time.time(), error=str(exc) or type(exc).__name__)
            else:
                self.audit = AuditView(audit(streams), start_ms, end_ms, time.time())
            await trio.sleep(self.audit_interval)

    def page(self) -> str:
        return render(self.status, self.lag.series(), self.audit, title=self.topology.path.stem)

    def data(self) -> dict[str, Any]:
        view = self.audit
        return {
            "status": None if self.status is None else self.status.to_json(),
            "mirror_lag_seconds": self.lag.series(),
            "audit": None if view is None else {
                "from_ms": view.start_ms, "to_ms": view.end_ms, "ran_at": view.ran_at, "error": view.error,
                "rows": [r.to_json() for r in view.rows],
            },
        }  # fmt: skip

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                head = await _read_head(stream)
                if head is None:
                    return
                method, _, rest = head.partition(" ")
                path = rest.split(" ", 1)[0].split("?", 1)[0]
                if method != "GET":
                    await _respond(stream, 405, "text/plain", "only GET\n")
                elif path == "/":
                    await _respond(stream, 200, "text/html; charset=utf-8", self.page())
                elif path == "/status.json":
                    await _respond(stream, 200, "application/json", json.dumps(self.data(), indent=1))
                else:
                    await _respond(stream, 404, "text/plain", "not found\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)


async def _read_head(stream: trio.SocketStream) -> str | None:
    """The request line, once the whole head has arrived; None for a client that sent none."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > MAX_REQUEST_HEAD:
            await _respond(stream, 431, "text/plain", "request head too large\n")
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0].decode("latin-1").strip()


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}


async def _respond(stream: trio.SocketStream, code: int, content_type: str, body: str) -> None:
    payload = body.encode()
    head = (
        f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    await stream.send_all(head.encode() + payload)


async def serve_console(topology: Topology, listen: str, *, audit_interval: float = 60.0, say: Any = print) -> None:
    """``tributary up``'s console: served alongside the appliance until cancelled, and never
    fatal to it (a port in use costs the page, not the appliance)."""
    console = Console(topology, audit_interval=audit_interval)
    try:
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(console.run, listen)
            say(f"console on http://{host}:{port}/")
    except* OSError as group:
        errors = [exc for exc in group.exceptions if isinstance(exc, OSError)]
        say(f"console not served on {listen}: {errors[0].strerror or errors[0]}")
