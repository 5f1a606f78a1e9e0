"""One broker connection: pipelining, in-flight bound, timeouts, failures, cancellation, sockets."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaConnectionError, KafkaError, RequestTimedOutError, UnsupportedVersionError
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster as KafkaCluster
from tributary.client.wire.connection import BrokerConnection, connect, open_on_stream
from tributary.protocol.headers import RequestEnvelope, decode_response, encode_request
from tributary.protocol.messages import (
    ApiKey,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster
from tributary.testing.ports import free_port

from .conftest import topic_name
from .fake_broker import FakeBroker, HangUp

PARTITIONS = 12


async def _create_and_fill(cluster: Cluster, topic: str) -> None:
    """A topic whose partition p holds p records (one batch each)."""
    async with KafkaCluster(cluster.bootstrap) as client:
        await Admin(client).create_topic(topic, PARTITIONS)
        raw = RawClient(client)
        for p in range(PARTITIONS):
            for i in range(p):
                await raw.produce_partition(topic, p, build_batch([(None, b"%d-%d" % (p, i), (), None)]))


async def test_many_concurrent_requests_on_one_connection_get_their_own_responses(single_broker: Cluster) -> None:
    topic = topic_name("pipeline")
    await _create_and_fill(single_broker, topic)
    host, port = single_broker.brokers[0].address
    config = ClientConfig(max_in_flight=5)
    answers: dict[int, int] = {}
    peak = 0
    async with connect(host, port, config=config, broker=1) as conn:

        async def ask(i: int) -> None:
            nonlocal peak
            partition = i % PARTITIONS
            request = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)],
                    )
                ],
            )
            response: ListOffsetsResponse = await conn.request(request)
            peak = max(peak, conn.in_flight)
            (answer,) = response.topics[0].partitions
            assert answer.partition_index == partition
            answers[i] = answer.offset

        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(ask, i)
                peak = max(peak, conn.in_flight)
        assert conn.in_flight == 0
    # Each response matched its own request: partition p holds p records.
    assert answers == {i: i % PARTITIONS for i in range(200)}
    assert peak == config.max_in_flight


def _metadata_answer(node_id: int) -> MetadataResponse:
    return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=node_id, host="h", port=1)])


async def test_requests_are_pipelined_up_to_the_in_flight_bound() -> None:
    """The fake broker holds every request until the test lets go: exactly
    max_in_flight of them reach it meanwhile."""
    fake = FakeBroker()
    arrived = 0
    release = trio.Event()
    config = ClientConfig(max_in_flight=4)

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        nonlocal arrived
        arrived += 1
        await release.wait()
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    results: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=config, broker="fake") as conn:

            async def ask(i: int) -> None:
                response = await conn.request(MetadataRequest(topics=None))
                results.append((i, response.brokers[0].node_id))

            async with trio.open_nursery() as requests:
                for i in range(10):
                    requests.start_soon(ask, i)
                await trio.testing.wait_all_tasks_blocked()
                assert conn.in_flight == config.max_in_flight
                assert arrived == config.max_in_flight
                release.set()
    # The fake answered with each request's correlation id: every caller got its own answer.
    metadata_ids = [cid for key, _, cid in fake.seen if key == ApiKey.METADATA]
    assert sorted(node for _, node in results) == sorted(metadata_ids)
    assert len(results) == 10


async def test_a_request_the_caller_encodes_gets_its_answer_undecoded() -> None:
    """exchange(): the caller's own frame goes out under the connection's correlation id and
    the answer comes back as bytes, header first; the pipeline stays in order with request()."""
    fake = FakeBroker()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:
            version = conn.api_version(ApiKey.METADATA)

            def encode(correlation_id: int) -> bytes:
                return encode_request(MetadataRequest(topics=None), version, correlation_id, "by-hand")

            frame = await conn.exchange(ApiKey.METADATA, version, encode)
            assert frame is not None
            correlation_id, response = decode_response(ApiKey.METADATA, version, frame)
            assert response.brokers[0].node_id == correlation_id
            decoded = await conn.request(MetadataRequest(topics=None))
            assert decoded.brokers[0].node_id == correlation_id + 1
            with pytest.raises(UnsupportedVersionError):
                await conn.exchange(ApiKey.METADATA, 99, encode)
            assert conn.in_flight == 0
        nursery.cancel_scope.cancel()


async def test_a_response_out_of_order_closes_the_connection() -> None:
    fake = FakeBroker(in_order=False)
    release_first = trio.Event()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        if envelope.correlation_id == 1:  # the first Metadata (ApiVersions took id 0)
            await release_first.wait()
        else:
            release_first.set()
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    errors: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:

            async def ask() -> None:
                try:
                    await conn.request(MetadataRequest(topics=None))
                except KafkaConnectionError as exc:
                    errors.append(str(exc))

            async with trio.open_nursery() as requests:
                requests.start_soon(ask)
                requests.start_soon(ask)
            assert conn.closed
    assert len(errors) == 2
    assert all("correlation id 2, expected 1" in e for e in errors), errors


async def test_a_timed_out_request_closes_the_connection_and_fails_the_others(autojump_clock: Any) -> None:
    fake = FakeBroker()

    async def never(envelope: RequestEnvelope, request: MetadataRequest) -> None:
        await trio.sleep_forever()

    fake.handlers[ApiKey.METADATA] = never
    client_stream, server_stream = trio.testing.memory_stream_pair()
    outcomes: dict[float, BaseException] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=ClientConfig(request_timeout=30), broker=3) as conn:

            async def ask(timeout: float) -> None:
                try:
                    await conn.request(MetadataRequest(topics=None), timeout=timeout)
                except (RequestTimedOutError, KafkaConnectionError) as exc:
                    outcomes[timeout] = exc

            async with trio.open_nursery() as requests:
                requests.start_soon(ask, 5)
                requests.start_soon(ask, 60)
            assert conn.closed
            with pytest.raises(
                KafkaConnectionError, match="connection to broker 3 was closed after a request timed out"
            ):
                await conn.request(MetadataRequest(topics=None))
        nursery.cancel_scope.cancel()
    timed_out, failed = outcomes[5], outcomes[60]
    assert trio.current_time() == pytest.approx(5)  # the deadline, not a tick later
    assert isinstance(timed_out, RequestTimedOutError)
    assert "METADATA v" in str(timed_out) and "broker 3" in str(timed_out) and "within 5 s" in str(timed_out)
    assert type(failed) is KafkaConnectionError
    assert "in flight" in str(failed)


async def test_a_broken_connection_fails_every_request_in_flight_or_waiting() -> None:
    """Two requests in flight (the bound), two waiting for a slot; the broker hangs up."""
    fake = FakeBroker()
    arrived = 0

    async def hang_up_at_two(envelope: RequestEnvelope, request: MetadataRequest) -> None:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            await trio.testing.wait_all_tasks_blocked()  # the other two wait for a slot
            raise HangUp
        await trio.sleep_forever()

    fake.handlers[ApiKey.METADATA] = hang_up_at_two
    client_stream, server_stream = trio.testing.memory_stream_pair()
    errors: list[KafkaConnectionError] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=ClientConfig(max_in_flight=2), broker=9) as conn:

            async def ask() -> None:
                with pytest.raises(KafkaConnectionError) as caught:
                    await conn.request(MetadataRequest(topics=None))
                errors.append(caught.value)

            with trio.fail_after(5):
                async with trio.open_nursery() as requests:
                    for _ in range(4):
                        requests.start_soon(ask)
            assert conn.closed and conn.in_flight == 0
    assert arrived == 2
    assert len(errors) == 4
    for error in errors:
        assert error.broker == 9
        assert error.retriable and error.invalidates_metadata
        assert "connection to broker 9" in str(error)


async def test_a_cancelled_caller_leaves_the_connection_usable() -> None:
    fake = FakeBroker()
    slow_started = trio.Event()
    release_slow = trio.Event()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        if envelope.correlation_id == 1:
            slow_started.set()
            await release_slow.wait()
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:
            with trio.move_on_after(10) as scope:
                async with trio.open_nursery() as requests:
                    requests.start_soon(conn.request, MetadataRequest(topics=None))
                    await slow_started.wait()
                    requests.cancel_scope.cancel()
            assert not scope.cancelled_caught
            assert conn.in_flight == 1  # its slot is held until the answer arrives
            release_slow.set()
            response = await conn.request(MetadataRequest(topics=None))
            assert response.brokers[0].node_id == 2  # not the abandoned answer (1)
            assert conn.in_flight == 0 and not conn.closed


async def test_acks_zero_style_requests_return_once_written() -> None:
    fake = FakeBroker()

    async def silent(envelope: RequestEnvelope, request: MetadataRequest) -> None:
        return None

    fake.handlers[ApiKey.METADATA] = silent
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:
            assert await conn.request(MetadataRequest(topics=None), expect_response=False) is None
            assert conn.in_flight == 0
    assert [key for key, _, _ in fake.seen] == [ApiKey.API_VERSIONS, ApiKey.METADATA]


async def test_connecting_to_nothing_names_the_broker() -> None:
    port = free_port()
    with pytest.raises(KafkaConnectionError, match=rf"cannot connect to broker 4 \(127.0.0.1:{port}\)") as caught:
        async with connect("127.0.0.1", port, broker=4):
            pass
    assert caught.value.broker == 4 and caught.value.retriable


async def test_socket_buffers_are_configurable(single_broker: Cluster) -> None:
    host, port = single_broker.brokers[0].address
    config = ClientConfig(send_buffer_bytes=256 * 1024, receive_buffer_bytes=384 * 1024)
    async with connect(host, port, config=config) as conn:
        sndbuf, rcvbuf = conn.socket_buffer_sizes()
    # Linux reports twice what was set (bookkeeping overhead); others report it as set.
    assert sndbuf in (256 * 1024, 512 * 1024)
    assert rcvbuf in (384 * 1024, 768 * 1024)


async def test_leaving_the_block_stops_everything(single_broker: Cluster) -> None:
    host, port = single_broker.brokers[0].address
    async with connect(host, port) as conn:
        await conn.request(MetadataRequest(topics=None))
    assert conn.closed
    with pytest.raises(KafkaConnectionError, match="closed by the client"):
        await conn.request(MetadataRequest(topics=None))
    assert isinstance(conn, BrokerConnection)


def _metadata_frame(correlation_id: int, version: int, topics: int = 0) -> bytes:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=f"t{i:0100d}") for i in range(topics)])
    return encode_request(request, version, correlation_id, "by-hand")


async def test_started_requests_are_answered_by_callback_in_order_with_awaited_ones() -> None:
    """start(): no task of its own; the answer (or the error) comes to a callback, once, and
    the request keeps its place in the send order among awaited requests."""
    fake = FakeBroker()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    answers: list[tuple[str, int]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=ClientConfig(max_in_flight=3), broker="fake") as conn:
            version = conn.api_version(ApiKey.METADATA)
            everything_answered = trio.Event()

            def answered(answer: bytes | KafkaError) -> None:
                assert isinstance(answer, bytes)
                response = conn.decode(ApiKey.METADATA, version, answer)
                answers.append(("started", response.brokers[0].node_id))
                if len(answers) == 3:
                    everything_answered.set()

            async def awaited() -> None:
                response = await conn.request(MetadataRequest(topics=None))
                answers.append(("awaited", response.brokers[0].node_id))

            conn.start(ApiKey.METADATA, version, MetadataRequest(topics=None), answered)
            async with trio.open_nursery() as requests:
                requests.start_soon(awaited)
                await trio.testing.wait_all_tasks_blocked()
            conn.start(ApiKey.METADATA, version, lambda cid: _metadata_frame(cid, version), answered)
            await everything_answered.wait()
            assert conn.in_flight == 0
        nursery.cancel_scope.cancel()
    # ApiVersions took correlation id 0.
    assert answers == [("started", 1), ("awaited", 2), ("started", 3)]


async def test_start_needs_a_free_slot_and_an_open_connection() -> None:
    fake = FakeBroker()
    release = trio.Event()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        await release.wait()
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    answers: list[bytes | KafkaError] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=ClientConfig(max_in_flight=1), broker=7) as conn:
            version = conn.api_version(ApiKey.METADATA)
            conn.start(ApiKey.METADATA, version, MetadataRequest(topics=None), answers.append)
            with pytest.raises(trio.WouldBlock):
                conn.start(ApiKey.METADATA, version, MetadataRequest(topics=None), answers.append)
            assert conn.in_flight == 1
            await trio.testing.wait_all_tasks_blocked()  # written, held by the broker
            conn.close()
            (failure,) = answers
            assert type(failure) is KafkaConnectionError and failure.broker == 7
            assert "connection to broker 7 was closed by the client (METADATA in flight)" in str(failure)
            with pytest.raises(KafkaConnectionError, match="closed by the client"):
                conn.start(ApiKey.METADATA, version, MetadataRequest(topics=None), answers.append)
        nursery.cancel_scope.cancel()
    assert len(answers) == 1


async def test_a_started_request_times_out_by_the_readers_deadline(autojump_clock: Any) -> None:
    """No cancel scope per request: the reader keeps the earliest deadline in flight. A
    later request with a shorter timeout moves it earlier; an answered request's deadline
    passing closes nothing."""
    fake = FakeBroker()

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse | None:
        if request.topics is None:  # answered at once
            return _metadata_answer(envelope.correlation_id)
        await trio.sleep_forever()
        return None

    fake.handlers[ApiKey.METADATA] = metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    outcomes: dict[str, tuple[float, bytes | KafkaError]] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, config=ClientConfig(request_timeout=30), broker=5) as conn:
            version = conn.api_version(ApiKey.METADATA)
            t0 = trio.current_time()

            def note(name: str) -> Any:
                return lambda answer: outcomes.__setitem__(name, (trio.current_time() - t0, answer))

            stuck = MetadataRequest(topics=[])
            conn.start(ApiKey.METADATA, version, MetadataRequest(topics=None), note("quick"), timeout=2)
            await trio.sleep(1)
            assert "quick" in outcomes
            conn.start(ApiKey.METADATA, version, stuck, note("long"), timeout=60)
            await trio.sleep(5)  # past the quick request's deadline: nothing happens
            assert not conn.closed
            conn.start(ApiKey.METADATA, version, stuck, note("short"), timeout=10)
            await conn.wait_closed()
        nursery.cancel_scope.cancel()
    assert outcomes["quick"][0] < 1 and isinstance(outcomes["quick"][1], bytes)
    when, short = outcomes["short"]
    assert when == pytest.approx(16)
    assert isinstance(short, RequestTimedOutError) and "within 10 s" in str(short)
    when, long = outcomes["long"]
    assert when == pytest.approx(16)
    assert type(long) is KafkaConnectionError and "closed after a request timed out" in str(long)


async def test_frames_written_by_the_caller_and_the_writer_stay_whole_and_in_order() -> None:
    """Over TCP with a small send buffer, big frames do not fit at once: the caller writes
    what the socket takes and the writer the rest, and callers cancelled meanwhile leave no
    half frame behind (the fake broker decodes every request it receives)."""
    fake = FakeBroker()
    sizes: dict[int, int] = {}

    async def metadata(envelope: RequestEnvelope, request: MetadataRequest) -> MetadataResponse:
        sizes[envelope.correlation_id] = len(request.topics or ())
        return _metadata_answer(envelope.correlation_id)

    fake.handlers[ApiKey.METADATA] = metadata
    port = free_port()
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    config = ClientConfig(send_buffer_bytes=4096, max_in_flight=5)
    results: dict[int, int] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, fake.serve, listeners)
        async with connect("127.0.0.1", port, config=config, broker=2) as conn:
            version = conn.api_version(ApiKey.METADATA)

            async def ask(i: int, topics: int) -> None:
                frame = await conn.exchange(ApiKey.METADATA, version, lambda cid: _metadata_frame(cid, version, topics))
                assert frame is not None
                correlation_id, response = decode_response(ApiKey.METADATA, version, frame)
                assert response.brokers[0].node_id == correlation_id
                results[i] = correlation_id

            async with trio.open_nursery() as requests:
                for i in range(20):
                    requests.start_soon(ask, i, 3000 if i % 3 == 0 else i)
            assert len(results) == 20
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as requests:
                    for i in range(20, 25):
                        requests.start_soon(ask, i, 3000)
                    await trio.lowlevel.checkpoint()
                    scope.cancel()
            await ask(99, 1)
            assert not conn.closed and conn.in_flight == 0
        nursery.cancel_scope.cancel()
    metadata_ids = [cid for key, _, cid in fake.seen if key == ApiKey.METADATA]
    assert metadata_ids == sorted(metadata_ids)  # sent in correlation-id order
    assert sizes[results[0]] == 3000 and sizes[results[99]] == 1
    assert metadata_ids[-1] == results[99]
