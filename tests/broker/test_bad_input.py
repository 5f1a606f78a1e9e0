"""Bad input against a live broker: each attack is refused or closes its own
connection, other clients keep working, and the log is unchanged.

The broker runs as a real subprocess (tests/fixtures/brokers.py) and is spoken
to on the wire, so every assertion is about bytes, offsets and error codes.
Each attack is checked three ways: the attacker gets Kafka's answer (an error
code, or a closed connection), the attacked partition's log is byte-for-byte
what it was before (latest offset and fetched bytes), and a connection opened
before the attack still produces and fetches.
"""

from __future__ import annotations

import contextlib
import random
import resource
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.compression import Compression, compress
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ApiVersionsRequest
from tributary.protocol.primitives import encode_varint
from tributary.protocol.records import CONTROL_BIT, HEADER_SIZE, encode_batch_header, rewrite_crc
from tributary.testing.cluster import BrokerProcess
from tributary.testing.processes import rss_kib
from tributary.testing.wire import WireConnection

from .wire_helpers import (
    CLOSE_TIMEOUT,
    FETCH_V,
    LIST_OFFSETS_V,
    METADATA_V,
    PRODUCE_V,
    Bystander,
    batch,
    connect,
    create_topic,
    fetch_bytes,
    frame,
    latest,
    log_state,
    no_tracebacks,
    produce,
    produce_request,
    raw_request,
    receive_one,
    running_broker,
    send_and_expect_close,
    values,
)

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes
DEFAULT_MAX_MESSAGE = 1048588  # message.max.bytes
CRC_END = 21  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4)


@pytest.fixture(scope="module")
def broker(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module's attacks: each test has topics of its own."""
    with running_broker(zookeeper_server, tmp_path_factory.mktemp("broker")) as cluster:
        yield cluster.brokers[0]
        assert cluster.brokers[0].proc is not None
        assert cluster.brokers[0].proc.poll() is None, "the broker died during the attacks"


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[Bystander]:
    b = Bystander(broker)
    try:
        with no_tracebacks(broker):
            b.check()
            yield b
            b.check()
    finally:
        b.close()


@pytest.fixture
def victim(broker: BrokerProcess) -> Iterator[tuple[WireConnection, str]]:
    """A connection and a topic with two partitions, each holding three batches already."""
    with connect(broker) as conn:
        topic = create_topic(conn, partitions=2)
        for partition in (0, 1):
            for i in range(3):
                seeded = produce(conn, topic, batch(b"seed-%d-%d" % (partition, i), b"more"), partition)
                assert seeded == (ErrorCode.NONE, 2 * i)
        yield conn, topic


def corrupt(data: bytes, position: int) -> bytes:
    flipped = bytearray(data)
    flipped[position] ^= 0x01
    return bytes(flipped)


# --- corrupt and refused batches ------------------------------------------------------------------


GOOD = batch(b"first value", b"second value", b"third value")


@pytest.mark.parametrize(
    "position",
    [
        pytest.param(CRC_END, id="attributes"),
        pytest.param(CRC_END + 6, id="base-timestamp"),
        pytest.param(len(GOOD) // 2 + 20, id="record-body"),
        pytest.param(len(GOOD) - 1, id="last-byte"),
        pytest.param(CRC_END - 1, id="the-crc-itself"),
    ],
)
def test_crc_failure_gets_corrupt_message_and_nothing_is_appended(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander, position: int
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)

    assert produce(conn, topic, corrupt(GOOD, position)) == (ErrorCode.CORRUPT_MESSAGE, -1)

    assert log_state(conn, topic) == before
    bystander.check()
    # The refusal is an answer, not a reason to drop the client: the same
    # connection appends the intact batch next, at the offset the log was at.
    assert produce(conn, topic, GOOD) == (ErrorCode.NONE, before[0])
    assert values(fetch_bytes(conn, topic, before[0])) == [b"first value", b"second value", b"third value"]


def test_one_corrupt_batch_refuses_its_partition_only(victim: tuple[WireConnection, str], bystander: Bystander) -> None:
    conn, topic = victim
    p0, p1 = log_state(conn, topic, 0), log_state(conn, topic, 1)
    good = batch(b"good")
    bad = corrupt(batch(b"bad"), CRC_END + 2)
    # Partition 0: a good batch followed by a corrupt one in the same records;
    # partition 1: a good batch. Partition 0 appends nothing, partition 1 appends.
    response = conn.request(produce_request(topic, {0: good + bad, 1: good}), PRODUCE_V)
    results = {r.index: (r.error_code, r.base_offset) for r in response.responses[0].partition_responses}
    assert results == {0: (ErrorCode.CORRUPT_MESSAGE, -1), 1: (ErrorCode.NONE, p1[0])}

    assert log_state(conn, topic, 0) == p0
    assert latest(conn, topic, 1) == p1[0] + 1
    assert values(fetch_bytes(conn, topic, p1[0], 1)) == [b"good"]
    bystander.check()


def legacy_message_set(magic: int, value: bytes) -> bytes:
    """One message in the pre-0.11 format (magic 0 or 1), with a correct CRC-32."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def patched(data: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    """``data`` with one header field rewritten; the CRC recomputed unless the header
    would then be refused before its CRC is even looked at."""
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        rewrite_crc(out)
    return bytes(out)


def lying(records: bytes, count: int, codec: Compression = Compression.NONE) -> bytes:
    """A batch with a valid CRC whose header claims ``count`` records over ``records`` (an
    uncompressed records section, compressed here as ``codec``)."""
    payload = compress(codec, records)
    header = encode_batch_header(
        base_offset=0, partition_leader_epoch=-1, attributes=codec.value, base_timestamp=0, max_timestamp=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count, records=payload,
    )  # fmt: skip
    return header + payload


def bomb(codec: Compression) -> bytes:
    """A few hundred KB that inflate to 256 MiB: one record that declares 200 MiB, then zeros."""
    zeros = bytes(1 << 20)
    if codec is Compression.ZSTD:
        compressor: Any = zstandard.ZstdCompressor(level=3).compressobj()
    else:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    payload = compressor.compress(encode_varint(200 << 20))
    payload += b"".join(compressor.compress(zeros) for _ in range(256))
    payload += compressor.flush()
    header = encode_batch_header(
        base_offset=0, partition_leader_epoch=-1, attributes=codec.value, base_timestamp=0, max_timestamp=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=1, records=payload,
    )  # fmt: skip
    return header + payload


THREE = GOOD[HEADER_SIZE:]  # the records section of three honest records

REFUSED_RECORDS = [
    pytest.param(legacy_message_set(0, b"v0 message"), ErrorCode.INVALID_RECORD, id="magic-0"),
    pytest.param(legacy_message_set(1, b"v1 message"), ErrorCode.INVALID_RECORD, id="magic-1"),
    pytest.param(legacy_message_set(1, b"x" * 200), ErrorCode.INVALID_RECORD, id="magic-1-long"),
    pytest.param(
        legacy_message_set(1, b"a") + batch(b"v2 after v1"), ErrorCode.INVALID_RECORD, id="magic-1-then-magic-2"
    ),
    pytest.param(patched(GOOD, 16, ">b", 3, fix_crc=False), ErrorCode.CORRUPT_MESSAGE, id="magic-3"),
    pytest.param(GOOD[:-5], ErrorCode.CORRUPT_MESSAGE, id="truncated-batch"),
    pytest.param(GOOD[:40], ErrorCode.CORRUPT_MESSAGE, id="truncated-header"),
    pytest.param(GOOD + GOOD[:30], ErrorCode.CORRUPT_MESSAGE, id="trailing-partial-batch"),
    pytest.param(random.Random(7).randbytes(300), ErrorCode.CORRUPT_MESSAGE, id="random-bytes"),
    pytest.param(patched(GOOD, 8, ">i", 20, fix_crc=False), ErrorCode.CORRUPT_MESSAGE, id="batch-length-below-header"),
    pytest.param(patched(GOOD, 21, ">h", 7, fix_crc=False), ErrorCode.CORRUPT_MESSAGE, id="unknown-codec"),
    pytest.param(patched(GOOD, 21, ">h", CONTROL_BIT), ErrorCode.INVALID_RECORD, id="control-batch"),
    pytest.param(patched(GOOD, 23, ">i", 5), ErrorCode.INVALID_RECORD, id="offset-delta-beyond-count"),
    pytest.param(
        batch(b"v", producer_id=17, producer_epoch=0, base_sequence=-1),
        ErrorCode.INVALID_RECORD,
        id="producer-id-without-sequence",
    ),
    # Headers that lie about their records, with valid CRCs: once stored as phantom offsets
    # and records no consumer could decode.
    pytest.param(lying(THREE, 10), ErrorCode.CORRUPT_MESSAGE, id="claims-10-holds-3"),
    pytest.param(lying(THREE, 10, Compression.ZSTD), ErrorCode.CORRUPT_MESSAGE, id="claims-10-holds-3-zstd"),
    pytest.param(lying(THREE, 2**31 - 1), ErrorCode.CORRUPT_MESSAGE, id="claims-2-billion"),
    pytest.param(lying(random.Random(5).randbytes(500), 3), ErrorCode.CORRUPT_MESSAGE, id="garbage-records"),
    pytest.param(
        lying(random.Random(6).randbytes(500), 3, Compression.GZIP), ErrorCode.CORRUPT_MESSAGE, id="garbage-gzip"
    ),
]


@pytest.mark.parametrize(("records", "expected"), REFUSED_RECORDS)
def test_refused_records_get_kafkas_error_and_nothing_is_appended(
    victim: tuple[WireConnection, str], bystander: Bystander, records: bytes, expected: ErrorCode
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)
    assert produce(conn, topic, records) == (expected, -1)
    assert log_state(conn, topic) == before
    bystander.check()


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.GZIP])
def test_a_compression_bomb_is_refused_without_the_memory_it_asks_for(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander, codec: Compression
) -> None:
    conn, topic = victim
    data = bomb(codec)
    assert len(data) < 1_048_588  # under message.max.bytes: only its records give it away
    before, rss_before = log_state(conn, topic), broker.rss_kib() * 1024
    for _ in range(3):
        assert produce(conn, topic, data) == (ErrorCode.CORRUPT_MESSAGE, -1)
    grown = broker.rss_kib() * 1024 - rss_before
    print(
        f"{codec.name} bomb of {len(data)} bytes (256 MiB inflated): RSS {rss_before >> 20} MiB, grew {grown >> 20} MiB"
    )
    assert grown < 32 << 20, f"the broker's RSS grew by {grown >> 20} MiB"
    assert log_state(conn, topic) == before
    bystander.check()


def test_batch_over_message_max_bytes_gets_message_too_large(
    victim: tuple[WireConnection, str], bystander: Bystander
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)
    big = batch(b"x" * DEFAULT_MAX_MESSAGE)
    assert len(big) > DEFAULT_MAX_MESSAGE
    assert produce(conn, topic, big) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
    assert log_state(conn, topic) == before
    bystander.check()

    # The limit is the whole batch's size: a batch of exactly that size is appended.
    overhead = len(batch(b"x" * 1_000_000)) - 1_000_000  # varint widths are the same near the limit
    fitting = batch(b"x" * (DEFAULT_MAX_MESSAGE - overhead))
    assert len(fitting) == DEFAULT_MAX_MESSAGE
    assert produce(conn, topic, fitting) == (ErrorCode.NONE, before[0])


def test_topic_max_message_bytes_is_enforced(broker: BrokerProcess, bystander: Bystander) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn, configs={"max.message.bytes": "1000"})
        assert produce(conn, topic, batch(b"s" * 500)) == (ErrorCode.NONE, 0)
        before = log_state(conn, topic)
        assert produce(conn, topic, batch(b"x" * 1000)) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
        assert log_state(conn, topic) == before
    bystander.check()


# --- frames that close the connection ---------------------------------------------------------


def _header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """A v1 request header (non-flexible), client id "attacker"."""
    return struct.pack(">hhih", api_key, version, correlation_id, 8) + b"attacker"


def _produce_frame(topic: str, records: bytes) -> bytes:
    return raw_request(produce_request(topic, {0: records}), PRODUCE_V, 1)


def _oversized_records_length(topic: str) -> bytes:
    # A produce request whose records field claims far more bytes than the frame holds.
    request = bytearray(_produce_frame(topic, GOOD))
    at = bytes(request).rindex(struct.pack(">i", len(GOOD)) + GOOD[:8])
    struct.pack_into(">i", request, at, 50_000_000)
    return bytes(request)


GARBAGE: dict[str, Callable[[str], bytes]] = {
    "http-request": lambda topic: b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "tls-client-hello": lambda topic: bytes.fromhex("16030100a5010000a10303") + bytes(160),
    "zero-filled": lambda topic: bytes(64),
    "negative-length": lambda topic: struct.pack(">i", -5) + bytes(16),
    "frame-shorter-than-header": lambda topic: frame(b"\x00\x03"),
    "unknown-api-key": lambda topic: frame(_header(9999, 0) + bytes(32)),
    "negative-api-key": lambda topic: frame(_header(-1, 0)),
    "client-id-past-frame-end": lambda topic: frame(struct.pack(">hhih", 3, 1, 1, 500) + b"abc"),
    "truncated-metadata-body": lambda topic: frame(_header(3, 1) + struct.pack(">i", 3) + b"\x00\x05ab"),
    "produce-records-past-frame-end": _oversized_records_length,
    "random-produce-body": lambda topic: frame(_header(0, PRODUCE_V) + random.Random(3).randbytes(2000)),
}


@pytest.mark.parametrize("attack", sorted(GARBAGE))
def test_garbage_closes_only_that_connection(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander, attack: str
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)
    send_and_expect_close(broker, GARBAGE[attack](topic))
    assert log_state(conn, topic) == before
    bystander.check()


@pytest.mark.parametrize(
    "length",
    [
        pytest.param(DEFAULT_MAX_FRAME + 1, id="limit-plus-one"),
        pytest.param(2**31 - 1, id="int32-max"),
    ],
)
def test_frame_over_socket_request_max_bytes_closes_the_connection(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander, length: int
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)
    # The length prefix alone is refused: the broker does not wait for (or buffer) the body.
    send_and_expect_close(broker, struct.pack(">i", length) + b"\x00\x00\x00\x01")
    assert log_state(conn, topic) == before
    bystander.check()


@pytest.fixture(scope="module")
def small_frames_broker(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """A broker with socket.request.max.bytes at its minimum, to probe the boundary."""
    extra = {"socket.request.max.bytes": "1024"}
    with running_broker(zookeeper_server, tmp_path_factory.mktemp("small-frames"), extra) as cluster:
        yield cluster.brokers[0]


def _produce_frame_of(topic: str, payload_size: int) -> bytes:
    """A produce request of one good batch whose frame payload is exactly ``payload_size`` bytes."""
    size = 0
    for _ in range(5):
        request = _produce_frame(topic, batch(b"b" * size))
        size += payload_size - (len(request) - 4)
    request = _produce_frame(topic, batch(b"b" * size))
    assert len(request) - 4 == payload_size
    return request


def test_frame_at_the_limit_is_served_one_byte_over_closes(small_frames_broker: BrokerProcess) -> None:
    with no_tracebacks(small_frames_broker), connect(small_frames_broker) as conn:
        topic = create_topic(conn)
        with connect(small_frames_broker) as attacker:
            attacker.send_raw(_produce_frame_of(topic, 1024))
            answer = attacker.receive_frame()
            assert struct.unpack_from(">i", answer)[0] == 1  # the produce's correlation id: it was served
        assert latest(conn, topic) == 1
        before = log_state(conn, topic)

        send_and_expect_close(small_frames_broker, _produce_frame_of(topic, 1025))
        assert log_state(conn, topic) == before
        assert produce(conn, topic, batch(b"after")) == (ErrorCode.NONE, 1)


# --- connections closed mid-frame ------------------------------------------------------------


def _cut_points(request: bytes) -> dict[str, int]:
    return {
        "in-length-prefix": 2,
        "after-length-prefix": 4,
        "in-request-header": 9,
        "in-records": len(request) - len(GOOD) // 2,
        "one-byte-short": len(request) - 1,
    }


@pytest.mark.parametrize("abortive", [False, True], ids=["fin", "rst"])
@pytest.mark.parametrize("cut", list(_cut_points(b"x" * 200)))
def test_connection_closed_mid_frame_appends_nothing(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander, cut: str, abortive: bool
) -> None:
    conn, topic = victim
    before = log_state(conn, topic)
    request = _produce_frame(topic, GOOD)
    with socket.create_connection(broker.address, timeout=CLOSE_TIMEOUT) as sock:
        sock.sendall(request[: _cut_points(request)[cut]])
        if abortive:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # Whatever the broker makes of the partial request, it is not a produce.
    bystander.check()
    assert log_state(conn, topic) == before
    # The whole frame, sent on a fresh connection, is appended: the cut one was the only difference.
    with connect(broker) as again:
        again.send_raw(request)
        assert struct.unpack_from(">i", again.receive_frame())[0] == 1
    assert latest(conn, topic) == before[0] + 3


# --- idle connections ------------------------------------------------------------------------


IDLE_CONNECTIONS = 2000


@contextlib.contextmanager
def _open_file_soft_limit(limit: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def low_fd_limit_broker(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker started with the soft open-file limit many systems default to (1024):
    it must lift its own soft limit to serve thousands of clients."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE_CONNECTIONS * 2 + 200:
        pytest.skip(f"the hard open-file limit {hard} is too low for {IDLE_CONNECTIONS} connections")
    # Popen's child inherits the limit; the test process gets its own back once the broker runs.
    with contextlib.ExitStack() as stack:
        with _open_file_soft_limit(1024):
            cluster = stack.enter_context(running_broker(zookeeper_server, tmp_path))
        yield cluster.brokers[0]


def test_thousands_of_idle_connections(
    low_fd_limit_broker: BrokerProcess, record_property: Callable[[str, object], None]
) -> None:
    broker = low_fd_limit_broker
    assert broker.proc is not None
    pid = broker.proc.pid
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE_CONNECTIONS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(IDLE_CONNECTIONS * 2, hard), hard))
    try:
        with no_tracebacks(broker), connect(broker) as client:
            topic = create_topic(client)
            assert produce(client, topic, batch(b"before")) == (ErrorCode.NONE, 0)
            rss_before = rss_kib(pid)
            with contextlib.ExitStack() as stack:
                idle = []
                for i in range(IDLE_CONNECTIONS):
                    sock = stack.enter_context(socket.create_connection(broker.address, timeout=10))
                    if i % 10 == 0:  # a tenth are stuck in the middle of a frame: slow clients
                        sock.sendall(struct.pack(">i", 64) + b"\x00\x12")
                    else:
                        idle.append(sock)
                # A client that was connected before, and one that connects now, are served.
                assert produce(client, topic, batch(b"during")) == (ErrorCode.NONE, 1)
                with connect(broker) as late:
                    assert values(fetch_bytes(late, topic)) == [b"before", b"during"]
                # Every idle connection was accepted and is served: one ApiVersions each.
                request = raw_request(ApiVersionsRequest(), 0, 42)
                for sock in idle:
                    sock.sendall(request)
                decoder_frames = [receive_one(sock) for sock in idle]
                assert all(struct.unpack_from(">ih", f) == (42, 0) for f in decoder_frames)
                rss_loaded = rss_kib(pid)
            assert produce(client, topic, batch(b"after")) == (ErrorCode.NONE, 2)
        rss_after = rss_kib(pid)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    record_property("broker_rss_kib", {"before": rss_before, "loaded": rss_loaded, "after": rss_after})
    print(
        f"broker VmRSS: {rss_before} KiB before, {rss_loaded} KiB with {IDLE_CONNECTIONS} connections, "
        f"{rss_after} KiB after they closed"
    )
    # A connection costs a few KiB of buffers and task state, not megabytes.
    assert rss_loaded - rss_before < 100 * 1024, (rss_before, rss_loaded)


# --- a real client through all of it ------------------------------------------------------------


def test_confluent_client_keeps_working_during_attacks(broker: BrokerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with no_tracebacks(broker), connect(broker) as conn:
        topic = create_topic(conn)
        victim_topic = create_topic(conn)
        assert produce(conn, victim_topic, GOOD) == (ErrorCode.NONE, 0)
        before = log_state(conn, victim_topic)

        stop = threading.Event()
        delivered: list[bytes] = []
        failures: list[str] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                delivered.append(msg.value())  # type: ignore[attr-defined]

        def keep_producing() -> None:
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "enable.idempotence": True}
            )
            i = 0
            while not stop.is_set() or i < 50:
                producer.produce(topic, b"steady-%05d" % i, on_delivery=on_delivery)
                producer.poll(0.002)
                i += 1
            remaining = producer.flush(15)
            if remaining:
                failures.append(f"{remaining} messages not delivered")

        def attack_once() -> None:
            for attack in sorted(GARBAGE):
                send_and_expect_close(broker, GARBAGE[attack](victim_topic))
            send_and_expect_close(broker, struct.pack(">i", DEFAULT_MAX_FRAME + 1))
            for position in (CRC_END, len(GOOD) - 1):
                assert produce(conn, victim_topic, corrupt(GOOD, position)) == (ErrorCode.CORRUPT_MESSAGE, -1)
            assert produce(conn, victim_topic, legacy_message_set(1, b"old")) == (ErrorCode.INVALID_RECORD, -1)
            for _ in range(5):
                with socket.create_connection(broker.address, timeout=5) as sock:
                    sock.sendall(_produce_frame(victim_topic, GOOD)[:30])

        thread = threading.Thread(target=keep_producing, name="steady-producer")
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while not delivered:  # the client is up and running before the attacks start
                assert time.monotonic() < deadline and not failures, failures
                time.sleep(0.01)
            at_start, rounds = len(delivered), 0
            # Attack until the client has seen plenty of its messages acknowledged meanwhile.
            while rounds < 3 or len(delivered) < at_start + 200:
                assert time.monotonic() < deadline and not failures, (rounds, len(delivered), failures)
                attack_once()
                rounds += 1
        finally:
            stop.set()
            thread.join(30)
        assert not thread.is_alive()
        assert failures == []
        assert log_state(conn, victim_topic) == before
        # Everything the client sent is in the log once, in order (idempotence on, no duplicates).
        expected = [b"steady-%05d" % i for i in range(len(delivered))]
        assert sorted(delivered) == expected
        assert values(fetch_bytes(conn, topic)) == expected


def test_broker_survives_random_frames(
    broker: BrokerProcess, victim: tuple[WireConnection, str], bystander: Bystander
) -> None:
    """Seeded random frames with valid lengths and request headers of the APIs the broker
    serves: each gets a response or a closed connection, never a dead broker."""
    conn, topic = victim
    before = log_state(conn, topic)
    rng = random.Random(20240601)
    # Not CreateTopics or DeleteTopics: a random body that happened to decode could change topics.
    api_keys = [(0, PRODUCE_V), (1, FETCH_V), (2, LIST_OFFSETS_V), (3, METADATA_V), (18, 2), (22, 1)]
    for i in range(60):
        api_key, version = rng.choice(api_keys)
        body = rng.randbytes(rng.randrange(0, 300))
        with socket.create_connection(broker.address, timeout=CLOSE_TIMEOUT) as sock:
            sock.sendall(frame(_header(api_key, version, i) + body))
            sock.settimeout(CLOSE_TIMEOUT)
            try:
                answer = receive_one(sock)
            except ConnectionError:
                continue  # closed: the body did not decode
            assert struct.unpack_from(">i", answer)[0] == i  # answered: the answer is to this request
    assert log_state(conn, topic) == before
    assert broker.proc is not None and broker.proc.poll() is None
