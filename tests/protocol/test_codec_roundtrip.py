"""Every declared message, at every version it declares, survives encode/decode."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tributary.protocol import codec
from tributary.protocol.errors import UnsupportedVersionError
from tributary.protocol.messages import (
    API_MESSAGES,
    ApiKey,
    ApiVersionsRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
    ResponseHeader,
)
from tributary.protocol.supported import CLIENT_VERSIONS, SUPPORTED_VERSIONS

from .strategies import instances

ALL_CLASSES = [cls for pair in API_MESSAGES.values() for cls in pair] + [
    RequestHeader,
    ResponseHeader,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
]
CASES = [
    pytest.param(cls, v, id=f"{cls.__name__}-v{v}")
    for cls in ALL_CLASSES
    for v in range(cls.SPEC.valid.lo, (cls.SPEC.valid.hi or 0) + 1)
]


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(cls: type, version: int, data: Any) -> None:
    obj = data.draw(instances(cls, version))
    encoded = codec.encode(obj, version)
    assert codec.decode(cls, encoded, version) == obj
    # Encoding is a function of the value: the decoded copy encodes identically.
    assert codec.encode(codec.decode(cls, encoded, version), version) == encoded


def test_every_supported_version_is_declared() -> None:
    for table in (SUPPORTED_VERSIONS, CLIENT_VERSIONS):
        for key, versions in table.items():
            for cls in API_MESSAGES[key]:
                assert versions.lo in cls.SPEC.valid
                assert versions.hi in cls.SPEC.valid


#: Not at their newest, on purpose: the transaction APIs' later versions carry KIP-890's
#: server-side defence (broker-to-broker verification, epoch bumps on EndTxn), which is not
#: built; ConsumerGroupHeartbeat v1 is Kafka's unstable newest and already served.
NOT_NEWEST = frozenset(
    {"ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN", "END_TXN", "TXN_OFFSET_COMMIT", "WRITE_TXN_MARKERS"}
)


def test_the_broker_serves_the_newest_version_of_every_api_it_handles() -> None:
    # "Current versions": the newest each of Kafka's definitions declares, and every older one
    # the broker served before (the lower bounds old clients probe for stay where they were).
    for key, versions in SUPPORTED_VERSIONS.items():
        if key.name not in NOT_NEWEST:
            assert versions.hi == API_MESSAGES[key][0].SPEC.valid.hi, key.name
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE].lo == 0  # librdkafka <= 2.11 compresses only then
    for key, versions in CLIENT_VERSIONS.items():
        assert SUPPORTED_VERSIONS[key].lo <= versions.lo, key.name  # our client still finds its versions


def test_every_advertised_version_has_a_round_trip_case() -> None:
    cases = {(cls, v) for cls in ALL_CLASSES for v in range(cls.SPEC.valid.lo, (cls.SPEC.valid.hi or 0) + 1)}
    for key, versions in SUPPORTED_VERSIONS.items():
        for cls in API_MESSAGES[key]:
            for v in range(versions.lo, (versions.hi or 0) + 1):
                assert (cls, v) in cases


def test_defaults_follow_the_schema() -> None:
    # A few defaults the JSON files state explicitly.
    assert FetchRequest().max_bytes == 0x7FFFFFFF
    assert FetchRequest().replica_id == -1
    assert ProduceRequest().transactional_id is None
    assert MetadataRequest().allow_auto_topic_creation is True


def test_unsupported_version_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError):
        codec.encode(ProduceRequest(), 99)
    with pytest.raises(UnsupportedVersionError):
        codec.decode(ProduceRequest, b"", -1)


def test_newer_subscription_decodes_as_known_version() -> None:
    sub = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u", generation_id=4, rack_id="r1")
    v3 = codec.encode(sub, 3)
    # A future v4 appends fields; a v3 reader ignores what follows.
    assert codec.decode(ConsumerProtocolSubscription, v3 + b"\x00\x01extra", 3) == sub


def test_unknown_tagged_fields_are_skipped() -> None:
    req = ApiVersionsRequest(client_software_name="kcat", client_software_version="1.7.1")
    encoded = codec.encode(req, 3)
    assert encoded.endswith(b"\x00")  # empty tagged-field section
    with_unknown = encoded[:-1] + b"\x01\x2a\x03abc"  # one field, tag 42, 3 bytes
    assert codec.decode(ApiVersionsRequest, with_unknown, 3) == req
