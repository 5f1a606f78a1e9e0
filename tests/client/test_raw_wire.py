"""client/raw/wire.py against the generic codec: every version, both ways, and bad bytes refused."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.client.errors import KafkaError
from tributary.client.raw.batches import (
    RawBatches,
    fetch_results,
    parse_fetch_response,
    parse_produce_response,
    produce_results,
)
from tributary.client.raw.wire import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    decode_fetch_response,
    decode_produce_response,
    encode_produce_request,
)
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.codec import decode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.headers import encode_request, encode_response
from tributary.protocol.messages import FetchResponse, ProduceRequest, ProduceResponse
from tributary.protocol.records import build_batch

topics = st.text(min_size=1, max_size=12)
records = st.binary(max_size=300)
#: Record sets as brokers send them: whole batches, the last perhaps cut short.
_BATCHES = [build_batch([(b"k%d" % i, b"v" * (i * 7), (), 1_700_000_000_000 + i)]) for i in range(1, 5)]
record_sets = st.builds(
    lambda chosen, cut: b"".join(chosen)[: max(0, len(b"".join(chosen)) - cut)],
    st.lists(st.sampled_from(_BATCHES), max_size=3),
    st.sampled_from([0, 0, 5, 30]),
)
int64 = st.integers(-(2**63), 2**63 - 1)
maybe_text = st.none() | st.text(max_size=20)
partition_ids = st.integers(0, 2**31 - 1)


@st.composite
def produce_batches(draw: st.DrawFn) -> dict[TopicPartition, bytes]:
    names = draw(st.lists(topics, min_size=1, max_size=3, unique=True))
    return {
        TopicPartition(name, p): draw(records)
        for name in names
        for p in draw(st.lists(st.integers(0, 1000), min_size=1, max_size=4, unique=True))
    }


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(PRODUCE_VERSIONS),
    batches=produce_batches(),
    correlation_id=st.integers(0, 2**31 - 1),
    client_id=st.none() | st.text(max_size=30),
    transactional_id=st.none() | st.text(max_size=30),
    acks=st.sampled_from([-1, 0, 1]),
    timeout_ms=st.integers(0, 2**31 - 1),
)
def test_produce_requests_are_the_generic_codecs_bytes(  # noqa: PLR0917 (hypothesis passes them)
    version: int,
    batches: dict[TopicPartition, bytes],
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
) -> None:
    topics_data: dict[str, ProduceRequest.TopicProduceData] = {}
    for tp, data in batches.items():
        topic = topics_data.setdefault(tp.topic, ProduceRequest.TopicProduceData(name=tp.topic))
        topic.partition_data.append(ProduceRequest.PartitionProduceData(index=tp.partition, records=data))
    generic = ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=list(topics_data.values())
    )
    expected = encode_request(generic, version, correlation_id, client_id)
    views = {tp: memoryview(bytearray(data)) for tp, data in batches.items()}  # any buffer will do
    fast = encode_produce_request(
        version, correlation_id, client_id, views, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id
    )
    assert fast == expected


@st.composite
def produce_responses(draw: st.DrawFn) -> ProduceResponse:
    def partition(index: int) -> ProduceResponse.PartitionProduceResponse:
        return ProduceResponse.PartitionProduceResponse(
            index=index,
            error_code=draw(st.sampled_from([0, 0, 6, 10, 87])),
            base_offset=draw(int64),
            log_append_time_ms=draw(int64),
            log_start_offset=draw(int64),
            record_errors=[
                ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=draw(maybe_text))
                for i in draw(st.lists(st.integers(0, 99), max_size=2))
            ],
            error_message=draw(maybe_text),
        )

    names = draw(st.lists(topics, max_size=3, unique=True))
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=name,
                partition_responses=[partition(p) for p in draw(st.lists(partition_ids, max_size=3, unique=True))],
            )
            for name in names
        ],
        throttle_time_ms=draw(st.integers(0, 1000)),
    )


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(PRODUCE_VERSIONS), response=produce_responses(), correlation_id=st.integers(0, 99))
def test_produce_responses_read_as_the_generic_codec_reads_them(
    version: int, response: ProduceResponse, correlation_id: int
) -> None:
    frame = encode_response(response, version, correlation_id)[4:]
    got_id, answers = decode_produce_response(version, frame)
    assert got_id == correlation_id
    asked = {TopicPartition(t.name, p.index): b"" for t in response.responses for p in t.partition_responses}
    asked[TopicPartition("left-out", 0)] = b""
    generic = parse_produce_response(decode(ProduceResponse, frame[4:], version), asked, 1)
    fast = produce_results(answers, asked, 1)
    assert {tp: repr(r) for tp, r in fast.items()} == {tp: repr(r) for tp, r in generic.items()}


@st.composite
def fetch_responses(draw: st.DrawFn) -> FetchResponse:
    def partition(index: int) -> FetchResponse.PartitionData:
        aborted = draw(st.none() | st.lists(st.tuples(int64, int64), max_size=3))
        return FetchResponse.PartitionData(
            partition_index=index,
            error_code=draw(st.sampled_from([0, 0, 0, 1, 6])),
            high_watermark=draw(int64),
            last_stable_offset=draw(int64),
            log_start_offset=draw(int64),
            aborted_transactions=None
            if aborted is None
            else [FetchResponse.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted],
            preferred_read_replica=draw(st.integers(-1, 5)),
            records=draw(st.none() | record_sets),
        )

    names = draw(st.lists(topics, max_size=3, unique=True))
    return FetchResponse(
        throttle_time_ms=draw(st.integers(0, 1000)),
        error_code=draw(st.sampled_from([0, 0, 0, 71])),
        session_id=draw(st.integers(0, 99)),
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=name, partitions=[partition(p) for p in draw(st.lists(partition_ids, max_size=3, unique=True))]
            )
            for name in names
        ],
    )


def _plain(result: RawBatches | KafkaError) -> str:
    """Comparable text of a result, its records as bytes (a view and a copy print apart)."""
    if isinstance(result, RawBatches):
        return repr(dataclasses.replace(result, records=bytes(result.records)))
    return repr(result)


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(FETCH_VERSIONS), response=fetch_responses(), correlation_id=st.integers(0, 99))
def test_fetch_responses_read_as_the_generic_codec_reads_them(
    version: int, response: FetchResponse, correlation_id: int
) -> None:
    frame = encode_response(response, version, correlation_id)[4:]
    got_id, error_code, shares = decode_fetch_response(version, frame)
    assert got_id == correlation_id
    offsets = {TopicPartition(t.topic, p.partition_index): 7 for t in response.responses for p in t.partitions}
    offsets[TopicPartition("left-out", 0)] = 3
    generic = parse_fetch_response(decode(FetchResponse, frame[4:], version), offsets, 1)
    fast = fetch_results(error_code, shares, offsets, 1)
    assert {tp: _plain(r) for tp, r in fast.items()} == {tp: _plain(r) for tp, r in generic.items()}
    for share in shares:  # the records are the frame's own bytes, not a copy
        assert isinstance(share.records, memoryview)


@settings(max_examples=100, deadline=None)
@given(version=st.sampled_from(FETCH_VERSIONS), response=fetch_responses(), cut=st.integers(0, 10_000))
def test_a_truncated_fetch_response_is_a_protocol_error(version: int, response: FetchResponse, cut: int) -> None:
    frame = encode_response(response, version, 5)[4:]
    if cut >= len(frame):
        return
    with pytest.raises(ProtocolError):
        decode_fetch_response(version, frame[:cut])


@settings(max_examples=100, deadline=None)
@given(version=st.sampled_from(PRODUCE_VERSIONS), response=produce_responses(), cut=st.integers(0, 10_000))
def test_a_truncated_produce_response_is_a_protocol_error(version: int, response: ProduceResponse, cut: int) -> None:
    frame = encode_response(response, version, 5)[4:]
    if cut >= len(frame):
        return
    with pytest.raises(ProtocolError):
        decode_produce_response(version, frame[:cut])


@settings(deadline=None)
@given(data=st.binary(max_size=200), version=st.sampled_from(FETCH_VERSIONS))
def test_any_bytes_decode_or_are_refused_cleanly(data: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolError):
        decode_fetch_response(version, data)
    with contextlib.suppress(ProtocolError):
        decode_produce_response(min(version, PRODUCE_VERSIONS[-1]), data)


def test_lengths_beyond_the_frame_are_refused_before_allocating() -> None:
    # one topic, a name of 1 byte, then 2**31-1 partitions claimed
    frame = b"\x00\x00\x00\x05" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x7f\xff\xff\xff"
    with pytest.raises(ProtocolError, match="does not fit"):
        decode_produce_response(8, frame)
