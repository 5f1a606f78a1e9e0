"""Ask running components whether they answer: brokers, ZooKeeper servers, metrics endpoints.

Each probe has a short timeout and returns what it found or raises `ProbeError` with
one line saying why not, so that `tributary up` can wait on them and `tributary
status` can show "down" with a reason instead of a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import trio
from prometheus_client.parser import text_string_to_metric_families

from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.security.settings import PLAINTEXT, SecurityConfig
from tributary.client.wire.connection import connect
from tributary.client.wire.metadata import ClusterMetadata
from tributary.protocol.messages import MetadataRequest


class ProbeError(Exception):
    """The component did not answer as it should; the message says how."""


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def broker_metadata(
    host: str, port: int, timeout: float = 3.0, *, security: SecurityConfig = PLAINTEXT
) -> ClusterMetadata:
    """The cluster as this broker sees it (all topics), asked with ``security``'s TLS and login."""
    config = ClientConfig(
        connect_timeout=timeout, request_timeout=timeout, client_id="tributary-probe", security=security
    )
    try:
        with trio.fail_after(timeout * 2):
            async with connect(host, port, config=config) as conn:
                response = await conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    except trio.TooSlowError:
        raise ProbeError(f"{host}:{port} did not answer Metadata within {timeout * 2:g} s") from None
    except (KafkaError, OSError) as exc:
        raise ProbeError(str(exc)) from None
    return ClusterMetadata.from_response(response)


async def cluster_ready(
    addresses: Iterable[str], timeout: float = 3.0, *, security: SecurityConfig = PLAINTEXT
) -> None:
    """Whether every broker answers Metadata listing all of them and a controller.

    That is what clients need before they can create topics and produce."""
    addresses = list(addresses)
    for address in addresses:
        metadata = await broker_metadata(*split_address(address), timeout=timeout, security=security)
        if len(metadata.brokers) < len(addresses):
            raise ProbeError(f"{address} sees {len(metadata.brokers)} of {len(addresses)} brokers")
        if metadata.controller_id is None or metadata.controller_id < 0:
            raise ProbeError(f"{address} knows no controller yet")


def _reason(exc: BaseException) -> str:
    """The first concrete reason: trio hides "Connection refused" behind "all attempts ... failed"."""
    cause = exc.__cause__
    while isinstance(cause, BaseExceptionGroup):
        cause = cause.exceptions[0]
    for candidate in (cause, exc):
        if isinstance(candidate, OSError) and candidate.strerror:
            return candidate.strerror
    return str(exc)


async def _exchange(host: str, port: int, payload: bytes, timeout: float) -> bytes:
    try:
        with trio.fail_after(timeout):
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(payload)
                chunks = []
                while chunk := await stream.receive_some(65536):
                    chunks.append(chunk)
                return b"".join(chunks)
    except trio.TooSlowError:
        raise ProbeError(f"{host}:{port} did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise ProbeError(f"{host}:{port}: {_reason(exc)}") from None


async def zookeeper_ok(host: str, port: int, timeout: float = 2.0) -> None:
    """ZooKeeper's ``ruok`` four-letter word must be answered ``imok``."""
    answer = await _exchange(host, port, b"ruok", timeout)
    if answer != b"imok":
        raise ProbeError(f"zookeeper {host}:{port} answered {answer[:40]!r} to ruok")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


async def scrape(host: str, port: int, timeout: float = 3.0) -> list[Sample]:
    """The samples of a Prometheus text endpoint (``/metrics``)."""
    request = f"GET /metrics HTTP/1.0\r\nHost: {host}:{port}\r\nAccept: text/plain\r\n\r\n".encode()
    raw = await _exchange(host, port, request, timeout)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise ProbeError(f"metrics endpoint {host}:{port} answered {status.decode(errors='replace')!r}")
    return parse_samples(body.decode("utf-8", errors="replace"))


def parse_samples(text: str) -> list[Sample]:
    try:
        return [
            Sample(sample.name, dict(sample.labels), float(sample.value))
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]
    except ValueError as exc:
        raise ProbeError(f"not Prometheus text format: {exc}") from None


def total(samples: Iterable[Sample], name: str, **labels: str) -> float | None:
    """Sum of the samples called ``name`` whose labels include ``labels``; None if there are none."""
    values = [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()) and not math.isnan(s.value)
    ]
    return sum(values) if values else None


def maximum(samples: Iterable[Sample], name: str, **labels: str) -> float | None:
    values = [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()) and not math.isnan(s.value)
    ]
    return max(values) if values else None
