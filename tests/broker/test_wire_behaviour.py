"""Kafka's wire behaviour, checked against a live broker: versions, pipelining,
topic names, fetch sessions and limits, long polls, idempotent retries,
ListOffsets, acks=0 and requests to the wrong broker.

Everything is spoken on the wire (tests/broker/wire_helpers.py), so the
assertions are about exact error codes, offsets, correlation ids and bytes.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from tributary.protocol.records import complete_prefix_length, iter_batches
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import BrokerProcess, Cluster

from .wire_helpers import (
    API_VERSIONS_V,
    EARLIEST,
    FETCH_V,
    LATEST,
    LIST_OFFSETS_V,
    METADATA_V,
    PRODUCE_V,
    Bystander,
    assert_closed,
    base_offsets,
    batch,
    connect,
    create_topic,
    create_topics,
    decode,
    fetch_bytes,
    fetch_one,
    fetch_request,
    latest,
    list_offset,
    list_offsets_request,
    log_state,
    new_topic_name,
    no_tracebacks,
    produce,
    produce_request,
    raw_request,
    readable_within,
    receive_one,
    running_broker,
    values,
    with_version,
)


@pytest.fixture(scope="module")
def broker(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(zookeeper_server, tmp_path_factory.mktemp("broker")) as cluster:
        b = cluster.brokers[0]
        with no_tracebacks(b):
            yield b


def _open(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(broker.address, timeout=10)


# --- versions ---------------------------------------------------------------------------------


def test_unsupported_api_versions_version_gets_a_v0_error_body(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        advertised = conn.request(ApiVersionsRequest(), API_VERSIONS_V)
        assert advertised.error_code == ErrorCode.NONE

        # A client newer than the broker sends its newest ApiVersions (flexible header and body).
        request = ApiVersionsRequest(client_software_name="future-client", client_software_version="9.9")
        conn.send_raw(with_version(raw_request(request, 3, 77), 99))
        answer = conn.receive_frame()
        correlation_id, body = decode(ApiKey.API_VERSIONS, 0, answer)
        assert correlation_id == 77
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert ErrorCode.UNSUPPORTED_VERSION.value == 35
        # A v0 body and a v0 header, nothing else: correlation id, error code, the api_keys array.
        assert len(answer) == 4 + 2 + 4 + 6 * len(body.api_keys)
        assert body.api_keys == advertised.api_keys
        assert ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=0, max_version=4) in (
            body.api_keys
        )

        # The connection stays open, so the client retries at once with a version from the list.
        again = conn.request(ApiVersionsRequest(client_software_name="future-client"), 3)
        assert again.error_code == ErrorCode.NONE
        assert again.api_keys == advertised.api_keys


UNSUPPORTED = {
    "metadata-v99": lambda: with_version(raw_request(MetadataRequest(topics=None), 12, 5), 99),
    "metadata-v13-past-newest": lambda: with_version(raw_request(MetadataRequest(topics=None), 12, 5), 13),
    "produce-v12-past-newest": lambda: with_version(raw_request(ProduceRequest(acks=1, timeout_ms=1000), 11, 5), 12),
    "fetch-v3-below-minimum": lambda: raw_request(FetchRequest(max_wait_ms=0), 3, 5),
    "list-offsets-v0": lambda: raw_request(ListOffsetsRequest(replica_id=-1), 0, 5),
    "unknown-api-key-999": lambda: struct.pack(">ihhih", 10, 999, 0, 5, 0),
}


@pytest.mark.parametrize("request_name", sorted(UNSUPPORTED))
def test_unsupported_version_closes_the_connection(broker: BrokerProcess, request_name: str) -> None:
    bystander = Bystander(broker)
    try:
        bystander.check()
        with _open(broker) as sock:
            # Requests before the unsupported one are answered, in order; then the connection closes.
            sock.sendall(raw_request(MetadataRequest(topics=[]), METADATA_V, 4) + UNSUPPORTED[request_name]())
            correlation_id, _ = decode(ApiKey.METADATA, METADATA_V, receive_one(sock))
            assert correlation_id == 4
            assert_closed(sock)
        bystander.check()
    finally:
        bystander.close()


def test_advertises_exactly_the_supported_matrix(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        answer = conn.request(ApiVersionsRequest(), API_VERSIONS_V)
    advertised = {v.api_key: (v.min_version, v.max_version) for v in answer.api_keys}
    assert advertised == {int(key): (v.lo, v.hi) for key, v in SUPPORTED_VERSIONS.items()}


# --- pipelining --------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_request_order(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
    a, b = batch(b"a"), batch(b"b1", b"b2")
    requests: list[tuple[int, int, object]] = [
        (ApiKey.METADATA, METADATA_V, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])),
        (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: a})),
        (ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, list_offsets_request(topic, LATEST)),
        # A long poll for data that never comes: the requests behind it wait for its answer.
        (ApiKey.FETCH, FETCH_V, fetch_request([(topic, 0, 1)], max_wait_ms=300, min_bytes=1 << 20)),
        (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: b})),
        (ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
        (ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, list_offsets_request(topic, LATEST)),
        (ApiKey.FETCH, FETCH_V, fetch_request([(topic, 0, 0)])),
    ]
    correlation_ids = [1000 + 7 * i for i in range(len(requests))]
    with _open(broker) as sock:
        sock.sendall(
            b"".join(raw_request(body, v, c) for (_, v, body), c in zip(requests, correlation_ids, strict=True))
        )
        answers = [receive_one(sock) for _ in requests]
    assert [struct.unpack_from(">i", answer)[0] for answer in answers] == correlation_ids
    bodies = [decode(key, v, answer)[1] for (key, v, _), answer in zip(requests, answers, strict=True)]

    assert bodies[0].topics[0].name == topic
    assert bodies[1].responses[0].partition_responses[0].base_offset == 0
    assert bodies[2].topics[0].partitions[0].offset == 1  # after the first produce, before the second
    assert bytes(bodies[3].responses[0].partitions[0].records or b"") == b""
    assert bodies[4].responses[0].partition_responses[0].base_offset == 1
    assert bodies[6].topics[0].partitions[0].offset == 3
    assert values(bytes(bodies[7].responses[0].partitions[0].records)) == [b"a", b"b1", b"b2"]


def test_many_pipelined_produces_are_appended_in_order(broker: BrokerProcess) -> None:
    count = 60  # several times the broker's read-ahead queue
    with connect(broker) as conn:
        topic = create_topic(conn)
        with _open(broker) as sock:
            sock.sendall(
                b"".join(raw_request(produce_request(topic, {0: batch(b"%d" % i)}), PRODUCE_V, i) for i in range(count))
            )
            answers = [decode(ApiKey.PRODUCE, PRODUCE_V, receive_one(sock)) for _ in range(count)]
        assert [c for c, _ in answers] == list(range(count))
        assert [r.responses[0].partition_responses[0].base_offset for _, r in answers] == list(range(count))
        assert values(fetch_bytes(conn, topic)) == [b"%d" % i for i in range(count)]


def test_pipelined_produces_keep_each_requests_outcome(broker: BrokerProcess) -> None:
    """Produce requests queued one after another are appended together (one write per
    partition); each still gets what it would have got alone: a refused batch, an unknown
    partition or another API between them changes nothing for the others."""
    corrupt = bytearray(batch(b"bad"))
    corrupt[-1] ^= 0xFF
    with connect(broker) as conn:
        topic = create_topic(conn, partitions=2)
        requests: list[tuple[int, int, object]] = [
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: batch(b"a")})),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: bytes(corrupt)})),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {1: batch(b"x")}, acks=1)),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: batch(b"b1", b"b2")}, acks=1)),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {7: batch(b"nowhere")})),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: batch(b"c"), 1: batch(b"y")})),
            (ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, list_offsets_request(topic, LATEST)),
            (ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, {0: batch(b"d")})),
        ]
        with _open(broker) as sock:
            sock.sendall(b"".join(raw_request(body, v, i) for i, (_, v, body) in enumerate(requests)))
            answers = [decode(key, v, receive_one(sock)) for key, v, _ in requests]
        assert [c for c, _ in answers] == list(range(len(requests)))
        outcomes = [
            [(p.index, p.error_code, p.base_offset) for t in body.responses for p in t.partition_responses]
            for key, (_, body) in zip([r[0] for r in requests], answers, strict=True)
            if key == ApiKey.PRODUCE
        ]
        assert outcomes == [
            [(0, ErrorCode.NONE, 0)],
            [(0, ErrorCode.CORRUPT_MESSAGE, -1)],
            [(1, ErrorCode.NONE, 0)],
            [(0, ErrorCode.NONE, 1)],
            [(7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)],
            [(0, ErrorCode.NONE, 3), (1, ErrorCode.NONE, 1)],
            [(0, ErrorCode.NONE, 4)],
        ]
        assert answers[6][1].topics[0].partitions[0].offset == 4  # before the last produce, after the others
        assert values(fetch_bytes(conn, topic)) == [b"a", b"b1", b"b2", b"c", b"d"]
        assert values(fetch_bytes(conn, topic, partition=1)) == [b"x", b"y"]


# --- topic names ---------------------------------------------------------------------------------


INVALID_NAMES = ["", ".", "..", "a" * 250, "has space", "slash/name", "colon:name", "star*", "ünïcode", "tab\tname"]
VALID_NAMES = ["a" * 249, "Mixed.Case_name-1", "a..b", "...", "-_-"]


def _creatable(name: str) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)


def test_topic_names_are_validated_as_kafka_does(broker: BrokerProcess) -> None:
    suffix = new_topic_name()[2:8]
    valid = [name[: 249 - len(suffix)] + suffix for name in VALID_NAMES]
    with connect(broker) as conn:
        results = create_topics(conn, *(_creatable(n) for n in INVALID_NAMES + valid))
        assert results == {
            **{n: ErrorCode.INVALID_TOPIC_EXCEPTION for n in INVALID_NAMES},
            **{n: ErrorCode.NONE for n in valid},
        }
        # Metadata neither auto-creates an invalid name nor calls it merely unknown.
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in ["bad name", "a" * 250]],
            allow_auto_topic_creation=True,
        )
        answer = conn.request(request, METADATA_V)
        assert {t.name: t.error_code for t in answer.topics} == {
            "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
            "a" * 250: ErrorCode.INVALID_TOPIC_EXCEPTION,
        }
        every = {t.name for t in conn.request(MetadataRequest(topics=None), METADATA_V).topics}
        assert set(valid) <= every
        assert not every & set(INVALID_NAMES)


def test_topic_names_that_collide_in_metrics_are_refused(broker: BrokerProcess) -> None:
    """Kafka refuses a topic whose name equals an existing one once '.' and '_' are
    treated alike (they collide in metric names)."""
    base = new_topic_name().replace("-", "")
    with connect(broker) as conn:
        assert create_topics(conn, _creatable(f"{base}.x")) == {f"{base}.x": ErrorCode.NONE}
        assert create_topics(conn, _creatable(f"{base}_x")) == {f"{base}_x": ErrorCode.INVALID_TOPIC_EXCEPTION}
        # Auto-creation refuses it too; without auto-creation it is merely unknown.
        for allow, expected in [
            (True, ErrorCode.INVALID_TOPIC_EXCEPTION),
            (False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]:
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=f"{base}_x")], allow_auto_topic_creation=allow
            )
            assert [(t.name, t.error_code) for t in conn.request(request, METADATA_V).topics] == [
                (f"{base}_x", expected)
            ]
        every = {t.name for t in conn.request(MetadataRequest(topics=None), METADATA_V).topics}
        assert f"{base}.x" in every
        assert f"{base}_x" not in every
        # A name without '.' or '_' collides with nothing.
        assert create_topics(conn, _creatable(f"{base}-x")) == {f"{base}-x": ErrorCode.NONE}


# --- fetch sessions and limits ----------------------------------------------------------------------


def test_fetch_sessions_are_declined_and_full_responses_name_every_partition(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn, partitions=3)
        assert produce(conn, topic, batch(b"x" * 5000), partition=0) == (ErrorCode.NONE, 0)
        assert produce(conn, topic, batch(b"y"), partition=1) == (ErrorCode.NONE, 0)
        missing = new_topic_name()
        wanted = [(topic, 2, 0), (missing, 0, 0), (topic, 0, 0), (topic, 7, 0), (topic, 1, 0)]

        # session_epoch 0 asks for a new session; -1 fetches without one. Both get full answers, session 0.
        for epoch in (0, -1):
            answer = conn.request(fetch_request(wanted, max_bytes=100, session_epoch=epoch), FETCH_V)
            assert (answer.error_code, answer.session_id) == (ErrorCode.NONE, 0)
            got = [
                (t.topic, p.partition_index, p.error_code, p.high_watermark)
                for t in answer.responses
                for p in t.partitions
            ]
            assert sorted(got) == sorted(
                [
                    (topic, 2, ErrorCode.NONE, 0),
                    (missing, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                    (topic, 0, ErrorCode.NONE, 1),
                    (topic, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                    (topic, 1, ErrorCode.NONE, 1),
                ]
            )
            records = {
                (t.topic, p.partition_index): bytes(p.records or b"") for t in answer.responses for p in t.partitions
            }
            # max_bytes 100: the first partition with data returns its whole 5 KB batch, the rest nothing.
            assert values(records[topic, 0]) == [b"x" * 5000]
            assert records[topic, 1] == records[topic, 2] == b""

        # An incremental fetch in a session the broker never created.
        answer = conn.request(fetch_request([(topic, 0, 0)], session_id=12345, session_epoch=1), FETCH_V)
        assert (answer.error_code, answer.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_fetch_returns_a_whole_batch_larger_than_max_bytes(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn, partitions=2)
        big, small = batch(b"b" * 20_000, b"c" * 20_000), batch(b"s")
        for partition in (0, 1):
            assert produce(conn, topic, big, partition) == (ErrorCode.NONE, 0)
            assert produce(conn, topic, small, partition) == (ErrorCode.NONE, 2)
        stored = fetch_bytes(conn, topic)
        first_size = next(iter_batches(stored))[1].size
        assert first_size == len(big)

        for max_bytes, partition_max_bytes in [(100, 1 << 20), (1 << 20, 100), (1, 1)]:
            result = fetch_one(conn, topic, 0, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes)
            records = bytes(result.records)
            assert records == stored[:first_size], (max_bytes, partition_max_bytes)
            assert values(records) == [b"b" * 20_000, b"c" * 20_000]

        # Only the first partition with data gets a batch over the limit; the next one gets nothing.
        answer = conn.request(fetch_request([(topic, 0, 0), (topic, 1, 0)], partition_max_bytes=100), FETCH_V)
        sizes = [len(p.records or b"") for p in answer.responses[0].partitions]
        assert sizes == [len(big), 0]

        # Batches are never cut: a limit that ends inside the second batch returns the first only.
        result = fetch_one(conn, topic, 0, max_bytes=first_size + len(small) - 1)
        records = bytes(result.records)
        assert records == stored[:first_size]
        assert complete_prefix_length(records) == len(records)


def test_fetch_starts_at_the_batch_containing_the_offset(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
        assert produce(conn, topic, batch(*(b"a%d" % i for i in range(5)))) == (ErrorCode.NONE, 0)
        assert produce(conn, topic, batch(*(b"b%d" % i for i in range(3)))) == (ErrorCode.NONE, 5)
        assert produce(conn, topic, batch(b"c0")) == (ErrorCode.NONE, 8)
        for offset, expected in [(0, [0, 5, 8]), (3, [0, 5, 8]), (4, [0, 5, 8]), (5, [5, 8]), (7, [5, 8]), (8, [8])]:
            assert base_offsets(fetch_bytes(conn, topic, offset)) == expected, offset
        # At the log end: nothing, no error. Past it, or before the start: OFFSET_OUT_OF_RANGE.
        end = fetch_one(conn, topic, 9)
        assert (end.error_code, end.high_watermark, bytes(end.records or b"")) == (ErrorCode.NONE, 9, b"")
        for offset in (10, 1000, -1):
            assert fetch_one(conn, topic, offset).error_code == ErrorCode.OFFSET_OUT_OF_RANGE, offset


# --- long polls ----------------------------------------------------------------------------------


def test_long_poll_is_woken_by_an_append(broker: BrokerProcess) -> None:
    with connect(broker) as producer:
        topic = create_topic(producer, partitions=2)
        with _open(broker) as sock:
            started = time.monotonic()
            sock.sendall(
                raw_request(fetch_request([(topic, 0, 0), (topic, 1, 0)], max_wait_ms=5000, min_bytes=1), FETCH_V, 9)
            )
            # The broker holds the fetch: nothing to send yet.
            assert not readable_within(sock, 0.5)
            appended = time.monotonic()
            assert produce(producer, topic, batch(b"wake up"), partition=1) == (ErrorCode.NONE, 0)
            correlation_id, answer = decode(ApiKey.FETCH, FETCH_V, receive_one(sock))
            answered = time.monotonic()
    assert correlation_id == 9
    by_partition = {p.partition_index: bytes(p.records or b"") for p in answer.responses[0].partitions}
    assert by_partition[0] == b""
    assert values(by_partition[1]) == [b"wake up"]
    # Woken by the append, not by the 5 s deadline (the bound is generous on purpose).
    assert answered - appended < 3.0, answered - appended
    assert answered - started < 4.5


def test_long_poll_waits_until_min_bytes_have_arrived(broker: BrokerProcess) -> None:
    first, second = batch(b"one"), batch(b"two")
    with connect(broker) as producer:
        topic = create_topic(producer)
        with _open(broker) as sock:
            request = fetch_request([(topic, 0, 0)], max_wait_ms=10_000, min_bytes=len(first) + 1)
            sock.sendall(raw_request(request, FETCH_V, 3))
            assert not readable_within(sock, 0.3)
            assert produce(producer, topic, first) == (ErrorCode.NONE, 0)
            # One batch is fewer bytes than min_bytes: still waiting.
            assert not readable_within(sock, 0.5)
            assert produce(producer, topic, second) == (ErrorCode.NONE, 1)
            assert readable_within(sock, 3.0)
            _, answer = decode(ApiKey.FETCH, FETCH_V, receive_one(sock))
    assert values(bytes(answer.responses[0].partitions[0].records)) == [b"one", b"two"]


def test_long_poll_on_an_empty_partition_returns_empty_after_max_wait(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
        started = time.monotonic()
        result = fetch_one(conn, topic, 0, max_wait_ms=300, min_bytes=1)
        waited = time.monotonic() - started
    assert (result.error_code, result.high_watermark, bytes(result.records or b"")) == (ErrorCode.NONE, 0, b"")
    assert 0.29 <= waited < 2.0, waited


def test_long_poll_with_a_partition_error_returns_at_once(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
        started = time.monotonic()
        answer = conn.request(fetch_request([(topic, 0, 0), (topic, 5, 0)], max_wait_ms=5000, min_bytes=1), FETCH_V)
        waited = time.monotonic() - started
    codes = [p.error_code for p in answer.responses[0].partitions]
    assert codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert waited < 2.0, waited


# --- idempotent producers ----------------------------------------------------------------------------


def test_idempotent_retry_is_acknowledged_and_not_appended_twice(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
        init = conn.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 1)
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        assert pid >= 0 and epoch == 0

        def idempotent(sequence: int, *vals: bytes) -> bytes:
            return batch(*vals, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

        first = idempotent(0, b"p0", b"p1")
        assert produce(conn, topic, first) == (ErrorCode.NONE, 0)
        # The retry of a batch whose acknowledgement was lost: same id, epoch and sequence.
        assert produce(conn, topic, first) == (ErrorCode.NONE, 0)
        assert latest(conn, topic) == 2
        second = idempotent(2, b"p2")
        assert produce(conn, topic, second) == (ErrorCode.NONE, 2)
        # A retry arriving on a new connection, after a later batch: still recognised.
        with connect(broker) as retry:
            assert produce(retry, topic, first) == (ErrorCode.NONE, 0)
            assert produce(retry, topic, second) == (ErrorCode.NONE, 2)
        before = log_state(conn, topic)
        assert before[0] == 3
        assert values(before[1]) == [b"p0", b"p1", b"p2"]
        # A gap in the sequence is refused, and nothing is appended.
        assert produce(conn, topic, idempotent(7, b"gap")) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        assert log_state(conn, topic) == before
        assert produce(conn, topic, idempotent(3, b"p3")) == (ErrorCode.NONE, 3)


# --- ListOffsets ---------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_and_by_timestamp(broker: BrokerProcess) -> None:
    t0 = 1_700_000_000_000
    with connect(broker) as conn:
        topic = create_topic(conn)
        assert list_offset(conn, topic, EARLIEST) == (ErrorCode.NONE, 0, -1)
        assert list_offset(conn, topic, LATEST) == (ErrorCode.NONE, 0, -1)
        assert list_offset(conn, topic, t0)[:2] == (ErrorCode.NONE, -1)
        for i, ts in enumerate([t0 + 1000, t0 + 2000, t0 + 2000, t0 + 3000]):
            assert produce(conn, topic, batch(b"r%d" % i, timestamp=ts)) == (ErrorCode.NONE, i)

        assert list_offset(conn, topic, EARLIEST)[:2] == (ErrorCode.NONE, 0)
        assert list_offset(conn, topic, LATEST)[:2] == (ErrorCode.NONE, 4)
        # The first offset whose timestamp is at or after the one asked for, with its timestamp.
        assert list_offset(conn, topic, 0) == (ErrorCode.NONE, 0, t0 + 1000)
        assert list_offset(conn, topic, t0 + 1000) == (ErrorCode.NONE, 0, t0 + 1000)
        assert list_offset(conn, topic, t0 + 1001) == (ErrorCode.NONE, 1, t0 + 2000)
        assert list_offset(conn, topic, t0 + 2000) == (ErrorCode.NONE, 1, t0 + 2000)
        assert list_offset(conn, topic, t0 + 3000) == (ErrorCode.NONE, 3, t0 + 3000)
        assert list_offset(conn, topic, t0 + 3001) == (ErrorCode.NONE, -1, -1)
        assert list_offset(conn, topic, LATEST, partition=3)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offset(conn, new_topic_name(), LATEST)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# --- acks=0 ------------------------------------------------------------------------------------


def test_acks_zero_gets_no_response(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        topic = create_topic(conn)
        with _open(broker) as sock:
            sock.sendall(raw_request(produce_request(topic, {0: batch(b"fire")}, acks=0), PRODUCE_V, 1))
            sock.sendall(raw_request(produce_request(topic, {0: batch(b"and forget")}, acks=0), PRODUCE_V, 2))
            sock.sendall(raw_request(list_offsets_request(topic, LATEST), LIST_OFFSETS_V, 3))
            # The first answer on the connection is the ListOffsets one, and both produces are in.
            correlation_id, answer = decode(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, receive_one(sock))
            assert correlation_id == 3
            assert answer.topics[0].partitions[0].offset == 2
            assert not readable_within(sock, 0.2)
        assert values(fetch_bytes(conn, topic)) == [b"fire", b"and forget"]


def test_acks_zero_produce_that_fails_closes_the_connection(broker: BrokerProcess) -> None:
    """With no response to carry the error, Kafka closes the connection so the
    producer notices (and refreshes its metadata); nothing is appended."""
    with connect(broker) as conn:
        topic = create_topic(conn)
        assert produce(conn, topic, batch(b"kept")) == (ErrorCode.NONE, 0)
        before = log_state(conn, topic)
        corrupt = bytearray(batch(b"corrupt"))
        corrupt[-1] ^= 1
        for target, records in [(topic, bytes(corrupt)), (new_topic_name(), batch(b"to an unknown topic"))]:
            with _open(broker) as sock:
                sock.sendall(raw_request(produce_request(target, {0: records}, acks=0), PRODUCE_V, 1))
                assert_closed(sock)
        assert log_state(conn, topic) == before


# --- the wrong broker ------------------------------------------------------------------------------


def _leaders(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """partition -> leader, once every broker knows the topic (a bounded wait for ZooKeeper)."""
    deadline = time.monotonic() + 15
    for b in cluster.brokers:
        with connect(b) as conn:
            while True:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
                )
                (info,) = conn.request(request, METADATA_V).topics
                known = info.error_code == ErrorCode.NONE and len(info.partitions) == partitions
                if known and all(p.leader_id >= 0 for p in info.partitions):
                    leaders = {p.partition_index: p.leader_id for p in info.partitions}
                    break
                assert time.monotonic() < deadline, f"broker {b.broker_id} does not know {topic}: {info}"
                time.sleep(0.05)
    return leaders


def test_requests_to_a_non_leader_or_unknown_partition(broker_cluster: Cluster) -> None:
    brokers = {b.broker_id: b for b in broker_cluster.brokers}
    with connect(broker_cluster.brokers[0]) as conn:
        topic = create_topic(conn, partitions=3)
    leaders = _leaders(broker_cluster, topic, 3)
    assert set(leaders.values()) <= set(brokers)
    for partition, leader in leaders.items():
        for broker_id, b in brokers.items():
            if broker_id == leader:
                continue
            with connect(b) as conn:
                assert produce(conn, topic, batch(b"misdirected"), partition) == (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    -1,
                )
                assert fetch_one(conn, topic, 0, partition).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert list_offset(conn, topic, LATEST, partition)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        with connect(brokers[leader]) as conn:
            assert log_state(conn, topic, partition) == (0, b"")
            assert produce(conn, topic, batch(b"right"), partition) == (ErrorCode.NONE, 0)

    for b in broker_cluster.brokers:
        with connect(b) as conn:
            for name, partition in [(topic, 3), (topic, -1), (new_topic_name(), 0)]:
                assert produce(conn, name, batch(b"nowhere"), partition) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
                assert fetch_one(conn, name, 0, partition).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                assert list_offset(conn, name, LATEST, partition)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
