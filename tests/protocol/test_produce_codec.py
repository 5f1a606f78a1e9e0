"""The hand-written Produce codec and request header agree with the generic codec, always.

``protocol.produce_codec`` and the header shortcut in ``protocol.headers`` take the common
shapes straight off the bytes and leave everything else to the generic codec; these tests hold
them to the generic codec's answer (the same object, the same bytes, or the same error) on honest
messages of every version, and on frames cut, flipped and spliced anywhere."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol import codec, produce_codec
from tributary.protocol.headers import (
    _framed_writer,
    decode_request_body,
    decode_request_header,
    encode_request,
    encode_response_parts,
    request_header_version,
    response_header_version,
)
from tributary.protocol.messages import ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader
from tributary.protocol.primitives import Reader

from .strategies import instances

VERSIONS = range(ProduceRequest.SPEC.valid.lo, (ProduceRequest.SPEC.valid.hi or 0) + 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Long enough for two-byte compact lengths (127 and up) and multi-byte UTF-8.
TEXT = st.text(max_size=200)


def _requests(version: int) -> st.SearchStrategy[ProduceRequest]:
    partition = st.builds(ProduceRequest.PartitionProduceData, index=INT32, records=st.none() | st.binary(max_size=400))
    topic = st.builds(ProduceRequest.TopicProduceData, name=TEXT, partition_data=st.lists(partition, max_size=4))
    return st.builds(
        ProduceRequest,
        transactional_id=st.none() | TEXT if version >= 3 else st.none(),
        acks=INT16,
        timeout_ms=INT32,
        topic_data=st.lists(topic, max_size=3),
    )


def _generic_header(frame: bytes) -> Any:
    r = Reader(frame)
    api_key, version = r.int16(), r.int16()
    r.pos = 0
    return codec.read(RequestHeader, r, request_header_version(api_key, version)), r.pos


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What a decoder answered: its value, or the type and text of what it raised."""
    try:
        return "value", fn(*args)
    except Exception as exc:
        return "error", (type(exc), str(exc))


def _generic_request(frame: bytes, pos: int, version: int) -> ProduceRequest:
    return codec.read(ProduceRequest, Reader(frame, pos), version)


# --- requests --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), client_id=st.none() | TEXT)
def test_honest_requests_decode_as_the_generic_codec_decodes_them(
    data: st.DataObject, version: int, client_id: str | None
) -> None:
    request = data.draw(_requests(version))
    frame = encode_request(request, version, 17, client_id)[4:]
    envelope = decode_request_header(frame)
    assert (envelope.header, envelope.body_offset) == _generic_header(frame)
    assert envelope.header.client_id == client_id
    decoded = decode_request_body(envelope, frame)
    assert decoded == _generic_request(frame, envelope.body_offset, version)
    if version >= produce_codec.FIRST_VERSION:
        assert decoded == request
        assert all(type(p.records) in (bytes, type(None)) for t in decoded.topic_data for p in t.partition_data)


@settings(max_examples=50, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_requests_drawn_from_the_declarations_decode_alike(data: st.DataObject, version: int) -> None:
    request = data.draw(instances(ProduceRequest, version))
    frame = encode_request(request, version, 3, "c")[4:]
    envelope = decode_request_header(frame)
    assert decode_request_body(envelope, frame) == _generic_request(frame, envelope.body_offset, version)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_mutated_requests_get_the_generic_codecs_answer(data: st.DataObject, version: int) -> None:
    # A tagged field or two spliced in, bytes flipped, the frame cut: the shortcut answers as
    # the generic codec does, the same request or the same error.
    frame = bytearray(encode_request(data.draw(_requests(version)), version, 5, data.draw(st.none() | TEXT))[4:])
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        at = data.draw(st.integers(min_value=0, max_value=len(frame)))
        action = data.draw(st.sampled_from(["flip", "cut", "splice", "set"]))
        if action == "flip" and at < len(frame):
            frame[at] ^= data.draw(st.integers(min_value=1, max_value=255))
        elif action == "cut":
            del frame[at:]
        elif action == "set" and at < len(frame):
            frame[at] = data.draw(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF]))
        else:
            frame[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    raw = bytes(frame)
    fast = _outcome(decode_request_header, raw)
    assert _outcome(lambda: _fields(fast)) == _outcome(_generic_header, raw)
    if fast[0] == "value" and fast[1].api_key == ApiKey.PRODUCE:
        envelope = fast[1]
        assert _outcome(decode_request_body, envelope, raw) == _outcome(
            _generic_request, raw, envelope.body_offset, envelope.api_version
        )


def _fields(outcome: tuple[str, Any]) -> Any:
    """An envelope as (header, body offset); an error raised again, to be compared as raised."""
    kind, value = outcome
    if kind == "error":
        raise value[0](value[1])
    return value.header, value.body_offset


def test_tagged_fields_are_left_to_the_generic_codec() -> None:
    request = ProduceRequest(
        acks=1,
        timeout_ms=5,
        topic_data=[ProduceRequest.TopicProduceData("t", [ProduceRequest.PartitionProduceData(0, b"r")])],
    )
    frame = encode_request(request, 10, 1, "c")[4:]
    envelope = decode_request_header(frame)
    # The partition's empty tag section (after the records) becomes one unknown tag of 2 bytes.
    end = len(frame) - 2
    assert frame[end - 1 :] == b"\x00\x00\x00"
    tagged = frame[: end - 1] + b"\x01\x07\x02zz" + frame[end:]
    assert decode_request_body(envelope, tagged) == request == _generic_request(tagged, envelope.body_offset, 10)


def test_the_header_shortcut_takes_no_tagged_fields_either() -> None:
    frame = encode_request(ProduceRequest(), 9, 1, "c")[4:]
    tagged = frame[:11] + b"\x01\x05\x01x" + frame[12:]
    envelope = decode_request_header(tagged)
    assert (envelope.header, envelope.body_offset) == _generic_header(tagged)
    assert envelope.body_offset == 15


# --- responses -------------------------------------------------------------------------------


def _responses(version: int) -> st.SearchStrategy[ProduceResponse]:
    record_error = st.builds(
        ProduceResponse.BatchIndexAndErrorMessage, batch_index=INT32, batch_index_error_message=st.none() | TEXT
    )
    leader = st.builds(ProduceResponse.LeaderIdAndEpoch, leader_id=INT32, leader_epoch=INT32)
    partition = st.builds(
        ProduceResponse.PartitionProduceResponse,
        index=INT32,
        error_code=INT16,
        base_offset=INT64,
        log_append_time_ms=INT64,
        log_start_offset=INT64,
        record_errors=st.lists(record_error, max_size=2),
        error_message=st.none() | TEXT,
        current_leader=st.just(ProduceResponse.LeaderIdAndEpoch()) | leader,
    )
    topic = st.builds(
        ProduceResponse.TopicProduceResponse, name=TEXT, partition_responses=st.lists(partition, max_size=4)
    )
    endpoint = st.builds(ProduceResponse.NodeEndpoint, node_id=INT32, host=TEXT, port=INT32, rack=st.none() | TEXT)
    return st.builds(
        ProduceResponse,
        responses=st.lists(topic, max_size=3),
        throttle_time_ms=INT32,
        node_endpoints=st.just([]) | st.lists(endpoint, max_size=2),
    )


def _generic_response(response: ProduceResponse, version: int, correlation_id: int) -> list[Any]:
    header = (ResponseHeader(correlation_id), response_header_version(ApiKey.PRODUCE, version))
    return _framed_writer([header, (response, version)]).parts()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), correlation_id=INT32)
def test_responses_encode_to_the_generic_codecs_bytes(data: st.DataObject, version: int, correlation_id: int) -> None:
    response = data.draw(_responses(version))
    assert encode_response_parts(response, version, correlation_id) == _generic_response(
        response, version, correlation_id
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_what_the_shortcut_cannot_encode_the_generic_codec_refuses(version: int) -> None:
    response = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse("t", [ProduceResponse.PartitionProduceResponse(error_code=2**20)])
        ]
    )
    assert produce_codec.encode_response(response, version, 1) is None
    with pytest.raises(ValueError, match="cannot encode"):
        encode_response_parts(response, version, 1)
