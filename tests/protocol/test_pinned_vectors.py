"""Requests captured from real clients, decoded by our codec.

A live test points a confluent-kafka (librdkafka) producer at a plain socket
that answers with our encoder, as a broker would: ApiVersions, then Metadata,
then the Produce request it sends for one message. The frames it captured
once, and the first frame kafka-python sends, are pinned under ``vectors/``
so their tests do not depend on the installed client versions.

To recapture the pinned frames (from the repository root)::

    .venv/bin/python -m tests.protocol.test_pinned_vectors

which rewrites ``tests/protocol/vectors/*.hex`` with the versions in use.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka

from tributary.protocol import headers
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.messages import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from tributary.protocol.supported import SUPPORTED_VERSIONS

VECTORS = Path(__file__).parent / "vectors"
CLIENT_ID = "tributary-capture"
TOPIC = "clicks"
KEY, VALUE = b"key-1", b"hello tributary"
TIMESTAMP_MS = 1_700_000_000_000  # fixed, so the captured record batch is reproducible


def client_versions() -> tuple[str, str]:
    """(confluent-kafka, librdkafka) versions; ``version()`` is a str in 2.16, a (str, int) pair before."""
    version: Any = confluent_kafka.version()
    return version if isinstance(version, str) else version[0], confluent_kafka.libversion()[0]


# --- a socket that answers like a one-broker cluster ---


def _answer(payload: bytes, port: int) -> bytes | None:
    """Our response to a captured request, or None for requests we leave unanswered."""
    envelope = headers.decode_request_header(payload)
    version = envelope.api_version
    body: Any
    if envelope.api_key == ApiKey.API_VERSIONS:
        if version not in SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]:
            body, version = ApiVersionsResponse(error_code=35), 0  # UNSUPPORTED_VERSION, in v0
        else:
            body = ApiVersionsResponse(
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=key, min_version=v.lo, max_version=v.lo if v.hi is None else v.hi
                    )
                    for key, v in sorted(SUPPORTED_VERSIONS.items())
                ]
            )
    elif envelope.api_key == ApiKey.METADATA:
        m = MetadataResponse
        body = m(
            brokers=[m.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port)],
            cluster_id="tributary-test",
            controller_id=1,
            topics=[
                m.MetadataResponseTopic(
                    name=TOPIC,
                    partitions=[
                        m.MetadataResponsePartition(partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                    ],
                )
            ],
        )
    elif envelope.api_key == ApiKey.PRODUCE:
        p = ProduceResponse
        body = p(
            responses=[p.TopicProduceResponse(name=TOPIC, partition_responses=[p.PartitionProduceResponse(index=0)])]
        )
    else:
        return None
    return headers.encode_response(body, version, envelope.correlation_id)


def serve(
    server: socket.socket, done: Callable[[list[bytes]], bool], idle: Callable[[], object], timeout: float = 15.0
) -> list[bytes]:
    """Accept connections on ``server`` and answer requests until ``done(frames)``.

    Returns every request frame received (length prefix included), in order.
    Calls ``idle()`` between polls (to serve the client's callbacks)."""
    frames: list[bytes] = []
    port = server.getsockname()[1]
    decoders: dict[socket.socket, FrameDecoder] = {}
    server.setblocking(False)
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(server, selectors.EVENT_READ)
        try:
            while not done(frames):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"client did not finish in {timeout}s; got {len(frames)} frames")
                idle()
                for key, _ in sel.select(0.05):
                    if key.fileobj is server:
                        conn, _ = server.accept()
                        conn.settimeout(5)
                        decoders[conn] = FrameDecoder()
                        sel.register(conn, selectors.EVENT_READ)
                        continue
                    conn = key.fileobj  # type: ignore[assignment]
                    data = conn.recv(65536)
                    if not data:
                        sel.unregister(conn)
                        conn.close()
                        del decoders[conn]
                        continue
                    decoders[conn].feed(data)
                    for payload in decoders[conn].frames():
                        frames.append(len(payload).to_bytes(4, "big") + payload)
                        answer = _answer(payload, port)
                        if answer is not None:
                            conn.sendall(answer)
        finally:
            for conn in decoders:
                conn.close()
    return frames


def capture_librdkafka() -> list[bytes]:
    """Produce one message through librdkafka against :func:`serve`; its request frames."""
    delivered: list[Any] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{server.getsockname()[1]}",
                "client.id": CLIENT_ID,
                "socket.timeout.ms": 3000,
                "message.timeout.ms": 10000,
                "linger.ms": 0,
                "log_level": 0,
            }
        )
        try:
            producer.produce(
                TOPIC,
                key=KEY,
                value=VALUE,
                partition=0,
                timestamp=TIMESTAMP_MS,
                headers=[("h", b"v")],
                on_delivery=lambda err, msg: delivered.append(err),
            )
            frames = serve(server, lambda _: bool(delivered), lambda: producer.poll(0))
            assert delivered == [None], f"delivery failed: {delivered}"
            assert producer.flush(5) == 0
        finally:
            if hasattr(producer, "close"):  # newer confluent-kafka; older ones close when collected
                producer.close()
    return frames


def capture_kafka_python() -> bytes:
    """The first frame a kafka-python producer sends (it retries for a while: run it in a daemon thread)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka  # noqa: PLC0415  # only the capture script needs it

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(10)

        def connect() -> None:
            with contextlib.suppress(Exception):  # the socket never answers; only the bytes matter
                kafka.KafkaProducer(
                    bootstrap_servers=f"127.0.0.1:{server.getsockname()[1]}", client_id=CLIENT_ID, max_block_ms=2000
                ).close(timeout=1)

        threading.Thread(target=connect, daemon=True).start()
        conn, _ = server.accept()
        with conn:
            conn.settimeout(5)
            decoder = FrameDecoder()
            while (payload := decoder.next_frame()) is None:
                decoder.feed(conn.recv(65536))
    return len(payload).to_bytes(4, "big") + payload


# --- the pinned frames ---


def load_vector(name: str) -> bytes:
    lines = (VECTORS / f"{name}.hex").read_text().splitlines()
    return bytes.fromhex("".join(line for line in lines if not line.startswith("#")))


def _payload(frame: bytes) -> bytes:
    """The frame's payload, reassembled from one-byte chunks."""
    decoder = FrameDecoder()
    payloads: list[bytes] = []
    for i in range(len(frame)):
        decoder.feed(frame[i : i + 1])
        payloads.extend(decoder.frames())
    assert len(payloads) == 1
    assert decoder.buffered == 0
    return payloads[0]


def _decoded(name: str) -> tuple[bytes, headers.RequestEnvelope, Any]:
    """A pinned librdkafka request: its frame, its header (from our client id) and its body,
    decoded as the broker decodes them."""
    frame = load_vector(name)
    payload = _payload(frame)
    envelope = headers.decode_request_header(payload)
    assert envelope.header.client_id == CLIENT_ID
    return frame, envelope, headers.decode_request_body(envelope, payload)


def test_pinned_librdkafka_api_versions_v3() -> None:
    frame, envelope, body = _decoded("librdkafka_api_versions_v3")
    assert (envelope.api_key, envelope.api_version, envelope.correlation_id) == (ApiKey.API_VERSIONS, 3, 1)
    assert body == ApiVersionsRequest(
        client_software_name="confluent-kafka-python", client_software_version="2.16.1-rdkafka-2.16.0"
    )
    # Our encoder writes the same bytes: request header v2 (classic client id, tags) and a compact body.
    assert headers.encode_request(body, 3, 1, CLIENT_ID) == frame


def test_pinned_librdkafka_metadata_v8() -> None:
    frame, envelope, body = _decoded("librdkafka_metadata_v8")
    assert (envelope.api_key, envelope.api_version, envelope.correlation_id) == (ApiKey.METADATA, 8, 2)
    assert body == MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    assert headers.encode_request(body, 8, 2, CLIENT_ID) == frame


def test_pinned_librdkafka_produce_v8() -> None:
    frame, envelope, body = _decoded("librdkafka_produce_v8")
    assert (envelope.api_key, envelope.api_version) == (ApiKey.PRODUCE, 8)
    assert isinstance(body, ProduceRequest)
    assert body.transactional_id is None
    assert (body.acks, body.timeout_ms) == (-1, 30000)
    assert [t.name for t in body.topic_data] == [TOPIC]
    [partition] = body.topic_data[0].partition_data
    assert partition.index == 0
    batch = partition.records
    assert batch is not None
    # The record batch is opaque to the codec; check its v2 header by hand.
    assert int.from_bytes(batch[8:12], "big") == len(batch) - 12  # batch length
    assert batch[16] == 2  # magic
    assert int.from_bytes(batch[27:35], "big") == TIMESTAMP_MS  # base timestamp
    assert int.from_bytes(batch[57:61], "big") == 1  # record count
    assert KEY in batch
    assert VALUE in batch
    assert headers.encode_request(body, 8, envelope.correlation_id, CLIENT_ID) == frame


def test_pinned_kafka_python_api_versions_v4() -> None:
    frame = load_vector("kafka_python_api_versions_v4")
    payload = _payload(frame)
    envelope = headers.decode_request_header(payload)
    # v4 is beyond what we advertise (0-3) but declared, so it decodes; a broker answers it in v0.
    assert (envelope.api_key, envelope.api_version, envelope.correlation_id) == (ApiKey.API_VERSIONS, 4, 1)
    assert envelope.header.client_id == CLIENT_ID
    body = headers.decode_request_body(envelope, payload)
    assert body == ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12")
    assert headers.encode_request(body, 4, 1, CLIENT_ID) == frame


# --- the live capture, whatever librdkafka is installed ---


def test_live_librdkafka_requests_decode() -> None:
    frames = capture_librdkafka()
    decoded = []
    for frame in frames:
        payload = _payload(frame)
        envelope = headers.decode_request_header(payload)
        assert envelope.header.client_id == CLIENT_ID
        decoded.append((envelope, headers.decode_request_body(envelope, payload)))

    envelope, first = decoded[0]
    assert (envelope.api_key, envelope.api_version) == (ApiKey.API_VERSIONS, 3)
    assert first.client_software_name == "confluent-kafka-python"
    version, librdkafka_version = client_versions()
    assert first.client_software_version == f"{version}-rdkafka-{librdkafka_version}"

    kinds = [e.api_key for e, _ in decoded]
    assert ApiKey.METADATA in kinds
    for envelope, body in decoded:
        assert envelope.api_version in SUPPORTED_VERSIONS[ApiKey(envelope.api_key)]  # it respected our ApiVersions
        if envelope.api_key == ApiKey.METADATA:
            assert body.topics is None or {t.name for t in body.topics} <= {TOPIC}
    produces = [body for e, body in decoded if e.api_key == ApiKey.PRODUCE]
    assert len(produces) == 1
    [partition] = produces[0].topic_data[0].partition_data
    assert produces[0].topic_data[0].name == TOPIC
    assert partition.index == 0
    assert KEY in partition.records
    assert VALUE in partition.records


if __name__ == "__main__":
    rdkafka = "confluent-kafka {} / librdkafka {}".format(*client_versions())
    python = f"Python {sys.version.split()[0]}"
    captured: dict[int, bytes] = {}
    for f in capture_librdkafka():
        captured.setdefault(headers.decode_request_header(f[4:]).api_key, f)  # the first of each kind
    kafka_python_frame = capture_kafka_python()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.version import __version__ as kafka_python_version

    def pin(name: str, what: str, source: str, frame: bytes, against: str = "answered by our encoder") -> None:
        text = "\n".join(
            [
                f"# {what}, captured with `python -m tests.protocol.test_pinned_vectors`",
                f"# from {source}, {python},",
                f"# against a plain socket on 127.0.0.1 {against}.",
                "# The whole frame (int32 length prefix included), hex:",
                *(frame.hex()[i : i + 64] for i in range(0, 2 * len(frame), 64)),
                "",
            ]
        )
        (VECTORS / f"{name}.hex").write_text(text)

    VECTORS.mkdir(exist_ok=True)
    pin(
        "librdkafka_api_versions_v3",
        "librdkafka's first request, ApiVersions v3",
        rdkafka,
        captured[ApiKey.API_VERSIONS],
    )
    pin("librdkafka_metadata_v8", "librdkafka's Metadata v8 after ApiVersions", rdkafka, captured[ApiKey.METADATA])
    pin("librdkafka_produce_v8", "librdkafka's Produce v8 of one message", rdkafka, captured[ApiKey.PRODUCE])
    pin(
        "kafka_python_api_versions_v4",
        "kafka-python's first request, ApiVersions v4",
        f"kafka-python {kafka_python_version}",
        kafka_python_frame,
        against="that never answers",
    )
