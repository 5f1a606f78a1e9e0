"""Speaking to a live broker on the wire, for the bad-input and wire-behaviour tests.

Requests are built with the protocol package and sent over
tributary.testing.wire's WireConnection, so tests can assert exact error
codes, offsets and bytes. The versions are the newest the broker serves.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.messages import CreateTopicsRequest, FetchRequest, ListOffsetsRequest, ProduceRequest
from tributary.protocol.records import build_batch, iter_batches, iter_records
from tributary.testing.cluster import BrokerProcess, Cluster, start_cluster
from tributary.testing.wire import WireConnection

PRODUCE_V, FETCH_V, LIST_OFFSETS_V, METADATA_V, CREATE_TOPICS_V, API_VERSIONS_V = 8, 11, 5, 8, 4, 3
LATEST, EARLIEST = -1, -2
CLOSE_TIMEOUT = 5.0
BIG = 64 << 20


# --- brokers -------------------------------------------------------------------------------------


@contextlib.contextmanager
def running_broker(
    server: ZooKeeperServer, root: Path, extra: dict[str, str] | None = None, *, metrics: bool = False
) -> Iterator[Cluster]:
    """One broker in a chroot of its own, for as long as the block runs (``metrics``: with
    a Prometheus endpoint, on ``brokers[0].metrics_port``)."""
    yield from start_cluster(server_chroot(server, "b"), root, 1, extra, metrics=metrics)


@contextlib.contextmanager
def no_tracebacks(broker: BrokerProcess) -> Iterator[None]:
    """Bad input is the client's failure, not the broker's: nothing the broker logs
    meanwhile is a traceback (a connection task that crashed)."""
    start = broker.log_path.stat().st_size
    yield
    with broker.log_path.open("rb") as f:
        f.seek(start)
        written = f.read().decode(errors="replace")
    assert "Traceback" not in written, written[max(written.index("Traceback") - 300, 0) :][:3000]


# --- requests ----------------------------------------------------------------------------------


def connect(broker: BrokerProcess) -> WireConnection:
    return WireConnection(*broker.address, timeout=10.0)


def batch(*values: bytes, timestamp: int | None = None, **options: Any) -> bytes:
    """One v2 batch of ``values`` (no keys, no headers)."""
    return build_batch([(None, v, (), timestamp) for v in values], **options)


def new_topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def create_topics(conn: WireConnection, *topics: CreateTopicsRequest.CreatableTopic) -> dict[str, int]:
    response = conn.request(CreateTopicsRequest(topics=list(topics), timeout_ms=15_000), CREATE_TOPICS_V)
    return {t.name: t.error_code for t in response.topics}


def create_topic(conn: WireConnection, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    name = new_topic_name()
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )
    assert create_topics(conn, topic) == {name: ErrorCode.NONE}
    return name


def produce_request(topic: str, records: dict[int, bytes | None], acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=p, records=r) for p, r in records.items()],
            )
        ],
    )


def produce(conn: WireConnection, topic: str, records: bytes | None, partition: int = 0) -> tuple[int, int]:
    """(error code, base offset) of one partition's produce."""
    response = conn.request(produce_request(topic, {partition: records}), PRODUCE_V)
    (result,) = response.responses[0].partition_responses
    assert result.index == partition
    return result.error_code, result.base_offset


def list_offsets_request(topic: str, timestamp: int, partition: int = 0) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)],
            )
        ],
    )


def list_offset(conn: WireConnection, topic: str, timestamp: int, partition: int = 0) -> tuple[int, int, int]:
    """(error code, offset, timestamp) ListOffsets answers for one partition."""
    (result,) = conn.request(list_offsets_request(topic, timestamp, partition), LIST_OFFSETS_V).topics[0].partitions
    assert result.partition_index == partition
    return result.error_code, result.offset, result.timestamp


def latest(conn: WireConnection, topic: str, partition: int = 0) -> int:
    error, offset, _ = list_offset(conn, topic, LATEST, partition)
    assert error == ErrorCode.NONE
    return offset


def fetch_request(
    partitions: list[tuple[str, int, int]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = BIG,
    partition_max_bytes: int = BIG,
    session_id: int = 0,
    session_epoch: int = -1,
) -> FetchRequest:
    """A fetch of ``(topic, partition, offset)`` triples, topics in first-seen order."""
    topics: dict[str, FetchRequest.FetchTopic] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, FetchRequest.FetchTopic(topic=topic)).partitions.append(
            FetchRequest.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes
            )
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=list(topics.values()),
    )


def fetch_one(conn: WireConnection, topic: str, offset: int, partition: int = 0, **options: Any) -> Any:
    """The PartitionData of a fetch of one partition."""
    response = conn.request(fetch_request([(topic, partition, offset)], **options), FETCH_V)
    assert response.error_code == ErrorCode.NONE
    (result,) = response.responses[0].partitions
    assert result.partition_index == partition
    return result


def fetch_bytes(conn: WireConnection, topic: str, offset: int = 0, partition: int = 0) -> bytes:
    result = fetch_one(conn, topic, offset, partition)
    assert result.error_code == ErrorCode.NONE
    return bytes(result.records or b"")


def values(data: bytes) -> list[bytes | None]:
    return [r.value for pos, _ in iter_batches(data) for r in iter_records(data, pos)]


def base_offsets(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data)]


def log_state(conn: WireConnection, topic: str, partition: int = 0) -> tuple[int, bytes]:
    """What "the log is unchanged" compares: the latest offset and every byte of the log."""
    return latest(conn, topic, partition), fetch_bytes(conn, topic, 0, partition)


# --- raw frames and sockets ----------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def with_version(request_frame: bytes, version: int) -> bytes:
    """An encoded request frame claiming another API version (the body stays as encoded)."""
    out = bytearray(request_frame)
    struct.pack_into(">h", out, 6, version)
    return bytes(out)


def raw_request(body: Any, version: int, correlation_id: int) -> bytes:
    return encode_request(body, version, correlation_id, "tributary-tests")


def decode(api_key: int, version: int, response_frame: bytes) -> tuple[int, Any]:
    return decode_response(api_key, version, response_frame)


def assert_closed(sock: socket.socket) -> None:
    """The broker closes the connection without answering."""
    sock.settimeout(CLOSE_TIMEOUT)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return  # closed with our bytes unread: the kernel answers with a reset
    assert data == b"", f"the broker answered {data[:64]!r} instead of closing the connection"


def send_and_expect_close(broker: BrokerProcess, data: bytes) -> None:
    with socket.create_connection(broker.address, timeout=CLOSE_TIMEOUT) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        assert_closed(sock)


def readable_within(sock: socket.socket, seconds: float) -> bool:
    """Whether a response (or a close) arrives within ``seconds``."""
    readable, _, _ = select.select([sock], [], [], seconds)
    return bool(readable)


def receive_one(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, length)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class Bystander:
    """A client connected before an attack; ``check`` proves it is still served."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.conn = connect(broker)
        self.topic = create_topic(self.conn)
        self.sent: list[bytes] = []

    def check(self) -> None:
        value = b"bystander-%d" % len(self.sent)
        assert produce(self.conn, self.topic, batch(value)) == (ErrorCode.NONE, len(self.sent))
        self.sent.append(value)
        assert values(fetch_bytes(self.conn, self.topic, 0)) == self.sent

    def close(self) -> None:
        self.conn.close()


class ActiveBystander:
    """A client that keeps producing and consuming on a connection of its own, in a thread,
    for as long as the block runs: every round produces one value and fetches it back.
    ``finish`` proves it was served all along and still is."""

    def __init__(self, broker: BrokerProcess, pause: float = 0.05) -> None:
        self.conn = connect(broker)
        self.topic = create_topic(self.conn)
        self.rounds = 0
        self.slowest = 0.0  # seconds, the longest round: how long it was held up
        self.errors: list[str] = []
        self._pause = pause
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bystander", daemon=True)

    def _round(self) -> None:
        started = time.monotonic()
        value = b"bystander-%d" % self.rounds
        assert produce(self.conn, self.topic, batch(value)) == (ErrorCode.NONE, self.rounds)
        assert values(fetch_bytes(self.conn, self.topic, self.rounds)) == [value]
        self.rounds += 1
        self.slowest = max(self.slowest, time.monotonic() - started)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception as exc:
                self.errors.append(repr(exc))
                return
            self._stop.wait(self._pause)

    def __enter__(self) -> ActiveBystander:
        self._round()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.conn.close()

    def finish(self) -> None:
        """Stop the thread; assert every round succeeded, then serve one more."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the bystander is stuck"
        assert self.errors == [], self.errors
        before = self.rounds
        self._round()
        assert self.rounds == before + 1
