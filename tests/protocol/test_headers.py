from __future__ import annotations

from tributary.protocol import headers
from tributary.protocol.messages import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


def test_header_versions_follow_flexibility() -> None:
    assert headers.request_header_version(ApiKey.PRODUCE, 8) == 1
    assert headers.request_header_version(ApiKey.PRODUCE, 9) == 2
    assert headers.request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert headers.response_header_version(ApiKey.METADATA, 9) == 1
    assert headers.response_header_version(ApiKey.METADATA, 8) == 0
    # ApiVersions responses always use header v0, even for flexible v3.
    assert headers.response_header_version(ApiKey.API_VERSIONS, 3) == 0


def test_request_roundtrip_through_envelope() -> None:
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="clicks")])
    framed = headers.encode_request(body, 8, correlation_id=42, client_id="tributary")
    assert int.from_bytes(framed[:4], "big") == len(framed) - 4
    envelope = headers.decode_request_header(framed[4:])
    assert (envelope.api_key, envelope.api_version, envelope.correlation_id) == (ApiKey.METADATA, 8, 42)
    assert envelope.header.client_id == "tributary"
    assert headers.decode_request_body(envelope, framed[4:]) == body


def test_flexible_request_header_keeps_classic_client_id() -> None:
    framed = headers.encode_request(ApiVersionsRequest(), 3, correlation_id=1, client_id="rdkafka")
    # key, version, correlation id, then an int16-length client id (not compact), then tags.
    assert framed[4:12] == bytes.fromhex("0012000300000001")
    assert framed[12:14] == (7).to_bytes(2, "big")
    assert framed[14:21] == b"rdkafka"


def test_unknown_api_key_still_yields_a_header() -> None:
    frame = (999).to_bytes(2, "big") + (0).to_bytes(2, "big") + (5).to_bytes(4, "big") + b"\xff\xff"
    envelope = headers.decode_request_header(frame)
    assert (envelope.api_key, envelope.correlation_id, envelope.header.client_id) == (999, 5, None)


def test_response_roundtrip() -> None:
    body = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)])
    framed = headers.encode_response(body, 8, correlation_id=9)
    assert headers.peek_correlation_id(framed[4:]) == 9
    assert headers.decode_response(ApiKey.METADATA, 8, framed[4:]) == (9, body)


def test_api_versions_v3_response_has_no_header_tags() -> None:
    framed = headers.encode_response(ApiVersionsResponse(), 3, correlation_id=3)
    # correlation id, then the body (error code 0) directly: header v0.
    assert framed[4:10] == bytes.fromhex("000000030000")


def test_produce_request_v3_bytes() -> None:
    body = ProduceRequest(acks=1, timeout_ms=1500, topic_data=[])
    framed = headers.encode_request(body, 3, correlation_id=7, client_id=None)
    assert framed[4:] == bytes.fromhex("0000" "0003" "00000007" "ffff" "ffff" "0001" "000005dc" "00000000")


class _Region:
    """Stands for file regions the broker would send with sendfile."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def test_spliced_records_frame_like_inline_records() -> None:
    def response(records: object) -> FetchResponse:
        partitions = [
            FetchResponse.PartitionData(partition_index=i, high_watermark=10, records=records)  # type: ignore[arg-type]
            for i in range(2)
        ]
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions)])

    payload = b"batch-bytes" * 5
    inline = headers.encode_response(response(payload), 11, correlation_id=5)
    parts = headers.encode_response_parts(response(_Region(payload)), 11, correlation_id=5)
    # header and first partition, region, second partition's fields, region
    assert [type(p) for p in parts] == [bytes, _Region, bytes, _Region]
    assert b"".join(p if isinstance(p, bytes) else p.data for p in parts) == inline  # type: ignore[attr-defined]
