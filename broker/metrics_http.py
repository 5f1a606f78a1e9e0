"""The metrics endpoint: a minimal HTTP/1.1 server on trio for Prometheus scrapes.

prometheus_client's own ``start_http_server`` runs a thread per scrape; its
collectors would then read the broker's state (logs, groups, the ZooKeeper
session) from another thread while the trio thread changes it. Serving from
the broker's own nursery renders every scrape on the trio thread instead, so
no lock is needed, and the endpoint stops with the broker.

The body is the classic text format, announced as version 0.0.4, which every
Prometheus 2.x and 3.x reads (prometheus_client's newer default, 1.0.0, only
matters for names outside [a-zA-Z_:], which ours never use).

Each connection carries one request: ``GET /metrics`` answers the text
exposition format, ``GET /`` a pointer to it; the connection then closes.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

#: A request head (request line and headers) larger than this is refused.
MAX_HEAD_BYTES = 16 * 1024
#: A client that sends no complete request head within this time is dropped.
READ_TIMEOUT_S = 10.0

_INDEX = b"<html><body><a href='/metrics'>metrics</a></body></html>\n"


async def open_metrics_listeners(host: str, port: int) -> list[trio.SocketListener]:
    """Bind the endpoint (port 0: any free port); OSError names the setting."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot listen on {host}:{port} (setting 'metrics.port'): {exc.strerror}") from exc


async def serve_metrics(
    registry: CollectorRegistry,
    listeners: list[trio.SocketListener],
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await trio.serve_listeners(partial(_serve_one, registry), listeners, task_status=task_status)


async def _serve_one(registry: CollectorRegistry, stream: trio.SocketStream) -> None:
    async with stream:
        try:
            with trio.move_on_after(READ_TIMEOUT_S):
                head = await _read_head(stream)
                if head is None:
                    return
                await stream.send_all(_respond(registry, head))
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
            log.debug("metrics connection lost: %s", exc)


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            await stream.send_all(_response(431, "Request Header Fields Too Large", b"request head too large\n"))
            return None
        data = await stream.receive_some(4096)
        if not data:
            return None
        buffer += data
    return bytes(buffer)


def _respond(registry: CollectorRegistry, head: bytes) -> bytes:
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response(400, "Bad Request", b"malformed request line\n")
    method, target, _ = parts
    if method not in ("GET", "HEAD"):
        return _response(405, "Method Not Allowed", b"only GET and HEAD\n", extra="Allow: GET, HEAD\r\n")
    path = target.split("?", 1)[0]
    if path == "/metrics":
        response = _response(200, "OK", generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
    elif path == "/":
        response = _response(200, "OK", _INDEX, content_type="text/html; charset=utf-8")
    else:
        response = _response(404, "Not Found", b"not found; try /metrics\n")
    if method == "HEAD":
        response = response.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
    return response


def _response(
    status: int, reason: str, body: bytes, *, content_type: str = "text/plain; charset=utf-8", extra: str = ""
) -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body
