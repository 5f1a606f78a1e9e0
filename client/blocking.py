"""A small blocking fetcher for Spark executors: plain sockets, no trio, no event loop.

The Spark loader plans offset ranges on the driver and reads them in
executors, where an event loop is unwelcome; this module gives it what it
needs with one blocking socket per broker and one request at a time:

- :meth:`BlockingFetcher.offset_bounds` (earliest and latest offsets, for the planner);
- :meth:`BlockingFetcher.fetch_range`, the raw batches covering ``[start, end)``;
- :meth:`BlockingFetcher.records`, the decoded records of ``[start, end)`` exactly
  (a batch may start before ``start`` or run past ``end``; those records are dropped).

It speaks the same protocol package, negotiates versions the same way
(``versions.py``), logs in the same way over TLS and SASL (``security/``, the
config's ``security``) and raises the same errors (``errors.py``) as the Trio
client. Every socket operation is bounded by ``request_timeout``; a leader
change or a lost connection refreshes the metadata and retries, with backoff,
for up to ``retry_timeout`` (long enough for a failover: a dead leader is
replaced once its ZooKeeper session expires, 18 s by default).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from tributary.client.backoff import doubled
from tributary.client.config import ClientConfig
from tributary.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from tributary.client.raw.batches import (
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_PARTITION_MAX_BYTES,
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ListedOffset,
    RawBatches,
    fetch_request,
    fetch_timeout,
    list_offsets_request,
    parse_fetch_response,
    parse_list_offsets_response,
)
from tributary.client.security.login import sasl_login
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition
from tributary.client.wire.versions import (
    FIRST_API_VERSIONS_VERSION,
    BrokerApiVersions,
    api_versions_request,
    decode_api_versions,
    retry_version,
)
from tributary.protocol.errors import ProtocolError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_response, encode_request, peek_correlation_id
from tributary.protocol.messages import ApiKey, FetchResponse, ListOffsetsResponse, MetadataRequest, MetadataResponse
from tributary.protocol.records import Record
from tributary.protocol.schema import Declared

RECEIVE_CHUNK = 256 * 1024
#: How long a request is retried after a leader change or a lost connection.
DEFAULT_RETRY_TIMEOUT = 60.0
_MAX_CORRELATION_ID = 2**31 - 1


def _open_socket(host: str, port: int, config: ClientConfig, who: int | str) -> socket.socket:
    errors: list[str] = []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise KafkaConnectionError(f"cannot resolve broker {who} ({host}:{port}): {exc}", broker=who) from None
    for family, type_, proto, _, address in infos:
        sock = socket.socket(family, type_, proto)
        try:
            if config.send_buffer_bytes is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
            if config.receive_buffer_bytes is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.receive_buffer_bytes)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(config.connect_timeout)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            errors.append(str(exc.strerror or exc))
            continue
        if config.security.tls:
            return _tls(sock, host, port, config, who)
        return sock
    raise KafkaConnectionError(
        f"cannot connect to broker {who} ({host}:{port}): {'; '.join(errors) or 'no address'}", broker=who
    )


def _tls(sock: socket.socket, host: str, port: int, config: ClientConfig, who: int | str) -> socket.socket:
    """The TLS handshake on a connected socket (bounded by the connect timeout)."""
    try:
        return config.security.ssl_context().wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message or str(exc)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
    except OSError as exc:
        reason = str(exc.strerror or exc) or "the broker closed the connection"
    sock.close()
    raise KafkaConnectionError(
        f"cannot connect to broker {who} ({host}:{port}): TLS handshake failed: {reason}", broker=who
    )


class BlockingConnection:
    """One blocking, negotiated connection to one broker; one request at a time."""

    def __init__(self, host: str, port: int, *, config: ClientConfig | None = None, broker: int | str | None = None):
        self.config = config or ClientConfig()
        self.address = f"{host}:{port}"
        self.broker: int | str = broker if broker is not None else self.address
        self._sock: socket.socket | None = _open_socket(host, port, self.config, self.broker)
        self._decoder = FrameDecoder(self.config.max_response_size)
        self._correlation_id = 0
        try:
            self.versions = self._negotiate()
            if self.config.security.sasl:
                self._login()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def closed(self) -> bool:
        return self._sock is None

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self, error: KafkaError) -> KafkaError:
        self.close()
        return error

    def _exchange(self, body: Declared, api_key: int, version: int, timeout: float | None) -> bytes:
        if self._sock is None:
            raise KafkaConnectionError(f"connection to broker {self.broker} is closed", broker=self.broker)
        sock = self._sock
        correlation_id = self._correlation_id
        self._correlation_id = (correlation_id + 1) % _MAX_CORRELATION_ID
        timeout = self.config.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        name = ApiKey(api_key).name
        try:
            sock.settimeout(timeout)
            sock.sendall(encode_request(body, version, correlation_id, self.config.client_id))
            while (frame := self._decoder.next_frame()) is None:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                data = sock.recv(RECEIVE_CHUNK)
                if not data:
                    raise self._fail(
                        KafkaConnectionError(
                            f"broker {self.broker} closed the connection during {name}", broker=self.broker
                        )
                    )
                self._decoder.feed(data)
        except TimeoutError:
            raise self._fail(
                RequestTimedOutError(
                    f"{name} v{version} to broker {self.broker} got no response within {timeout:g} s",
                    broker=self.broker,
                )
            ) from None
        except ProtocolError as exc:
            raise self._fail(
                KafkaProtocolError(f"bad frame from broker {self.broker}: {exc}", broker=self.broker)
            ) from None
        except OSError as exc:
            raise self._fail(
                KafkaConnectionError(
                    f"connection to broker {self.broker} broke during {name}: {exc}", broker=self.broker
                )
            ) from None
        if peek_correlation_id(frame) != correlation_id:
            raise self._fail(
                KafkaProtocolError(
                    f"broker {self.broker} answered correlation id {peek_correlation_id(frame)}, "
                    f"expected {correlation_id}",
                    broker=self.broker,
                )
            )
        return frame

    def _negotiate(self) -> BrokerApiVersions:
        version = FIRST_API_VERSIONS_VERSION
        for _ in range(2):
            frame = self._exchange(api_versions_request(), ApiKey.API_VERSIONS, version, self.config.connect_timeout)
            _, response, decoded_at = decode_api_versions(frame, version)
            if decoded_at != version:
                version = retry_version(response, version, self.broker)
                continue
            return BrokerApiVersions.from_response(response, self.broker, version)
        raise KafkaProtocolError(f"broker {self.broker} refused ApiVersions twice", broker=self.broker)

    def _login(self) -> None:
        """The SASL exchange (client/security/login.py), as the Trio connection runs it."""
        login = sasl_login(self.config.security, self.versions, self.broker)
        step = next(login)
        while True:
            request, version = step
            response = self.request(request, version=version, timeout=self.config.connect_timeout)
            try:
                step = login.send(response)
            except StopIteration:
                return

    def request(self, body: Declared, *, version: int | None = None, timeout: float | None = None) -> Any:
        """Send ``body`` at the highest common version (or ``version``); the decoded response."""
        api_key = type(body).SPEC.api_key
        assert api_key is not None
        version = self.versions.pick(api_key) if version is None else self.versions.check(api_key, version)
        frame = self._exchange(body, api_key, version, timeout)
        try:
            return decode_response(api_key, version, frame)[1]
        except ProtocolError as exc:
            raise KafkaProtocolError(
                f"malformed {ApiKey(api_key).name} v{version} response from broker {self.broker}: {exc}",
                broker=self.broker,
            ) from exc


def _parse_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for item in items:
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no bootstrap servers given")
    return result


class BlockingFetcher:
    """Reads partitions of one cluster with blocking sockets; a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        config: ClientConfig | None = None,
        *,
        retries: int | None = None,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
    ) -> None:
        """``retries`` caps the attempts after the first (default: as many as fit in
        ``retry_timeout`` seconds)."""
        self.config = config or ClientConfig()
        self.bootstrap_servers = _parse_servers(bootstrap_servers)
        self.retries = retries
        self.retry_timeout = retry_timeout
        self._connections: dict[int, BlockingConnection] = {}
        self.metadata = ClusterMetadata()
        self.refresh_metadata()

    # --- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def __enter__(self) -> BlockingFetcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- metadata and connections ----------------------------------------------------------------

    def refresh_metadata(self) -> ClusterMetadata:
        failures = []
        for broker_id in list(self._connections):
            try:
                return self._apply(self._send(broker_id, self._metadata_request(broker_id)))
            except KafkaError as exc:
                failures.append(str(exc))
        for host, port in self.bootstrap_servers:
            try:
                with BlockingConnection(host, port, config=self.config) as conn:
                    version = conn.versions.pick(ApiKey.METADATA)
                    return self._apply(conn.request(self._metadata_body(version)))
            except KafkaError as exc:
                failures.append(str(exc))
        raise NoBrokersAvailableError("no broker answered a Metadata request: " + "; ".join(failures))

    @staticmethod
    def _metadata_body(version: int) -> MetadataRequest:
        return MetadataRequest(topics=[] if version == 0 else None, allow_auto_topic_creation=False)

    def _metadata_request(self, broker_id: int) -> MetadataRequest:
        return self._metadata_body(self._connection(broker_id).versions.pick(ApiKey.METADATA))

    def _apply(self, response: MetadataResponse) -> ClusterMetadata:
        self.metadata = ClusterMetadata.from_response(response)
        for broker_id, conn in list(self._connections.items()):
            info = self.metadata.brokers.get(broker_id)
            if info is not None and info.address != conn.address:
                conn.close()
                del self._connections[broker_id]
        return self.metadata

    def _connection(self, broker_id: int) -> BlockingConnection:
        conn = self._connections.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        info = self.metadata.brokers.get(broker_id)
        if info is None:
            raise KafkaConnectionError(f"broker {broker_id} is not in the cluster metadata", broker=broker_id)
        conn = BlockingConnection(info.host, info.port, config=self.config, broker=broker_id)
        self._connections[broker_id] = conn
        return conn

    def _send(self, broker_id: int, body: Declared, timeout: float | None = None) -> Any:
        return self._connection(broker_id).request(body, timeout=timeout)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (UnknownTopicOrPartitionError for an unknown topic)."""
        if topic not in self.metadata.topics:
            self.refresh_metadata()
        if topic not in self.metadata.topics:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} is not in the cluster metadata", topic=topic)
        return self.metadata.partitions_for(topic)

    def leader_for(self, topic: str, partition: int) -> int:
        leader = self.metadata.leader(topic, partition)
        if leader is None:
            leader = self.refresh_metadata().leader(topic, partition)
        if leader is not None:
            return leader
        if self.metadata.partition(topic, partition) is None:
            raise UnknownTopicOrPartitionError(
                f"{topic}-{partition} is not in the cluster metadata", topic=topic, partition=partition
            )
        raise LeaderNotAvailableError(f"{topic}-{partition} has no leader", topic=topic, partition=partition)

    def _with_retries(self, topic: str, partition: int, attempt: Any) -> Any:
        """Run ``attempt(leader)``, refreshing metadata and retrying retriable errors."""
        deadline = time.monotonic() + self.retry_timeout
        tries = 0
        while True:
            try:
                return attempt(self.leader_for(topic, partition))
            except KafkaError as exc:
                backoff = doubled(self.config.retry_backoff, tries, self.config.reconnect_backoff_max)
                out_of_tries = self.retries is not None and tries >= self.retries
                if not exc.retriable or out_of_tries or time.monotonic() + backoff > deadline:
                    raise
                tries += 1
                time.sleep(backoff)
                if exc.invalidates_metadata:
                    # If no broker answers, the next attempt fails and says why.
                    with contextlib.suppress(KafkaError):
                        self.refresh_metadata()
        raise AssertionError("unreachable")

    # --- offsets -------------------------------------------------------------------------------

    def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets by EARLIEST, LATEST or timestamp (ms), partition by partition. With
        READ_COMMITTED, LATEST is the last stable offset (what committed-only readers see)."""
        results: dict[TopicPartition, ListedOffset] = {}
        for tp, spec in specs.items():

            def attempt(leader: int, tp: TopicPartition = tp, spec: int = spec) -> ListedOffset:
                request = list_offsets_request({tp: spec}, isolation_level=isolation_level)
                response: ListOffsetsResponse = self._send(leader, request)
                result = parse_list_offsets_response(response, {tp: spec}, leader)[tp]
                if isinstance(result, KafkaError):
                    raise result
                return result

            results[tp] = self._with_retries(tp.topic, tp.partition, attempt)
        return results

    def offset_bounds(
        self, topic: str, partitions: Sequence[int] | None = None, *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[int, tuple[int, int]]:
        """``{partition: (earliest, latest)}`` for the planner: the offsets a
        consumer can read now are ``range(earliest, latest)`` (with READ_COMMITTED, a
        consumer of committed data: up to the last stable offset)."""
        ids = list(partitions) if partitions is not None else self.partitions_for(topic)
        earliest = self.list_offsets({TopicPartition(topic, p): EARLIEST for p in ids})
        latest = self.list_offsets({TopicPartition(topic, p): LATEST for p in ids}, isolation_level=isolation_level)
        return {p: (earliest[TopicPartition(topic, p)].offset, latest[TopicPartition(topic, p)].offset) for p in ids}

    # --- fetching ------------------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> RawBatches:
        """One fetch of a partition from ``offset``: its complete batches, raw.

        It returns as soon as there is data, or after ``max_wait_ms`` without
        (asking for no wait at all makes some brokers, Tansu among them, leave
        the partition out of the answer)."""
        tp = TopicPartition(topic, partition)

        def attempt(leader: int) -> RawBatches:
            request = fetch_request(
                {tp: offset},
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                partition_max_bytes=max_bytes,
                isolation_level=isolation_level,
            )
            response: FetchResponse = self._send(
                leader, request, timeout=fetch_timeout(self.config.request_timeout, max_wait_ms)
            )
            result = parse_fetch_response(response, {tp: offset}, leader)[tp]
            if isinstance(result, KafkaError):
                raise result
            return result

        result: RawBatches = self._with_retries(topic, partition, attempt)
        return result

    def fetch_range(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        *,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> Iterator[RawBatches]:
        """The raw batches holding offsets ``[start, end)``, one fetch at a time.

        The first batch may begin before ``start`` and the last run past ``end``
        (batches are never split). Raises OffsetOutOfRangeError, naming the range
        and the log's bounds, when the log does not hold all of ``[start, end)``.

        A high watermark below ``end`` is checked with ListOffsets before it counts as a
        log that ends early: a leader elected since ``end`` was listed knows its high
        watermark only once its followers fetch again, serving less than is committed
        until then, and it answers ListOffsets with OFFSET_NOT_AVAILABLE meanwhile (retried
        like any retriable error). With READ_COMMITTED the same holds of the last stable offset,
        and each fetch names the aborted transactions of what it returns (``RawBatches``)."""
        if start > end:
            raise ValueError(f"empty range [{start}, {end}) of {topic}-{partition}: start is after end")
        tp = TopicPartition(topic, partition)
        offset = start
        limit = max_bytes
        while offset < end:
            try:
                fetched = self.fetch(topic, partition, offset, max_bytes=limit, isolation_level=isolation_level)
            except OffsetOutOfRangeError as exc:
                raise self._range_error(tp, start, end, exc.log_start_offset, exc.high_watermark) from exc
            visible = fetched.high_watermark if isolation_level == READ_UNCOMMITTED else fetched.last_stable_offset
            if 0 <= visible <= offset:
                latest = self.list_offsets({tp: LATEST}, isolation_level=isolation_level)[tp].offset
                if latest > offset:
                    continue  # the new leader knows its high watermark now
                raise self._range_error(tp, start, end, fetched.log_start_offset, visible)
            if not fetched.batches:
                if fetched.truncated_bytes and limit < self.config.max_response_size // 2:
                    limit *= 2  # the next batch is larger than the limit: ask for more
                    continue
                hw = fetched.high_watermark
                raise KafkaError(
                    f"fetch of {topic}-{partition} at offset {offset} returned no complete batch "
                    + (
                        f"({fetched.truncated_bytes} bytes of a partial one) though the high watermark is {hw}"
                        if hw >= 0
                        else "and no bounds: the broker left the partition out of its answer"
                    ),
                    topic=topic,
                    partition=partition,
                )
            if fetched.next_offset <= offset:
                raise KafkaProtocolError(
                    f"fetch of {topic}-{partition} at offset {offset} returned only batches before it",
                    topic=topic,
                    partition=partition,
                )
            yield fetched
            offset = fetched.next_offset
            limit = max_bytes

    @staticmethod
    def _range_error(
        tp: TopicPartition, start: int, end: int, log_start: int | None, high_watermark: int | None
    ) -> OffsetOutOfRangeError:
        bounds = (
            f"[{log_start}, {high_watermark})"
            if log_start is not None and log_start >= 0 and high_watermark is not None
            else "unknown bounds"
        )
        return OffsetOutOfRangeError(
            f"offsets [{start}, {end}) of {tp} are not all in the log, which holds {bounds}",
            offset=start,
            log_start_offset=log_start,
            high_watermark=high_watermark,
            topic=tp.topic,
            partition=tp.partition,
        )

    def records(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        *,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> Iterator[Record]:
        """The records with offsets in ``[start, end)``, decompressed and decoded, in
        order (control records of transactions are skipped; with READ_COMMITTED, so are
        aborted transactions' records)."""
        committed = isolation_level == READ_COMMITTED
        for fetched in self.fetch_range(
            topic, partition, start, end, max_bytes=max_bytes, isolation_level=isolation_level
        ):
            yield from fetched.iter_records(start, end, committed_only=committed)


__all__ = ["DEFAULT_RETRY_TIMEOUT", "BlockingConnection", "BlockingFetcher"]
