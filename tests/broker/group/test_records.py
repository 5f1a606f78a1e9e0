"""The ``__consumer_offsets`` record layouts, byte for byte as Kafka writes them."""

from __future__ import annotations

import struct

import pytest

from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.broker.group.records import (
    GroupKey,
    OffsetKey,
    RecordFormatError,
    StoredGroup,
    StoredMember,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def compact(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def test_offset_key_layout() -> None:
    key = encode_offset_key("grp", "clicks", 7)
    assert key == b"\x00\x01" + s("grp") + s("clicks") + b"\x00\x00\x00\x07"
    assert decode_key(key) == OffsetKey("grp", "clicks", 7)
    # Version 0 keys (written by old brokers) are offset keys too.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("grp", "clicks", 7)


def test_group_key_layout() -> None:
    key = encode_group_key("grp")
    assert key == b"\x00\x02" + s("grp")
    assert decode_key(key) == GroupKey("grp")


def test_offset_value_v3_layout() -> None:
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1_700_000_000_000)
    data = encode_offset_value(value)
    assert data == b"\x00\x03" + struct.pack(">qi", 42, 5) + s("meta") + struct.pack(">q", 1_700_000_000_000)
    assert decode_offset_value(data) == value


def test_offset_value_with_expiry_is_written_as_v1() -> None:
    value = OffsetAndMetadata(offset=42, metadata="", commit_timestamp=1000, expire_timestamp=5000)
    data = encode_offset_value(value)
    assert data == b"\x00\x01" + struct.pack(">q", 42) + s("") + struct.pack(">qq", 1000, 5000)
    assert decode_offset_value(data) == value


def test_older_and_flexible_offset_values_decode() -> None:
    v0 = b"\x00\x00" + struct.pack(">q", 9) + s("m") + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetAndMetadata(9, -1, "m", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 9) + s("m") + struct.pack(">q", 77)
    assert decode_offset_value(v2) == OffsetAndMetadata(9, -1, "m", 77)
    # v4: compact string, then tagged fields (one unknown tag, skipped).
    v4 = b"\x00\x04" + struct.pack(">qi", 9, 3) + compact("m") + struct.pack(">q", 77) + b"\x01\x05\x02xy"
    assert decode_offset_value(v4) == OffsetAndMetadata(9, 3, "m", 77)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x09" + b"\x00" * 30, b"\x00\x03\x00\x00"],
)
def test_malformed_values_are_refused(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_offset_value(data)
    with pytest.raises(RecordFormatError):
        decode_group_value(data)


def test_unknown_key_version_is_refused() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x05" + s("g"))


GROUP = StoredGroup(
    protocol_type="consumer",
    generation=3,
    protocol="range",
    leader="m-1",
    current_state_timestamp=123,
    members=(
        StoredMember("m-1", None, "client", "/10.0.0.1", 30_000, 10_000, b"sub-1", b"asg-1"),
        StoredMember("m-2", "instance-2", "client", "/10.0.0.2", 30_000, 10_000, b"sub-2", b""),
    ),
)


def test_group_value_v3_layout_and_round_trip() -> None:
    data = encode_group_value(GROUP)
    expected = (
        b"\x00\x03"
        + s("consumer")
        + struct.pack(">i", 3)
        + s("range")
        + s("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 2)
        + s("m-1")
        + b"\xff\xff"  # null group instance id
        + s("client")
        + s("/10.0.0.1")
        + struct.pack(">ii", 30_000, 10_000)
        + struct.pack(">i", 5)
        + b"sub-1"
        + struct.pack(">i", 5)
        + b"asg-1"
    )
    assert data.startswith(expected)
    assert decode_group_value(data) == GROUP


def test_group_value_v0_uses_the_session_timeout_for_rebalances() -> None:
    data = (
        b"\x00\x00"
        + s("consumer")
        + struct.pack(">i", 1)
        + b"\xff\xff"
        + b"\xff\xff"
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("/h")
        + struct.pack(">i", 6000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    group = decode_group_value(data)
    assert group.protocol is None and group.leader is None and group.current_state_timestamp == -1
    assert group.members == (StoredMember("m", None, "c", "/h", 6000, 6000, b"", b""),)


def test_group_value_v4_flexible_decodes() -> None:
    data = (
        b"\x00\x04"
        + compact("consumer")
        + struct.pack(">i", 2)
        + compact("range")
        + b"\x00"  # null leader
        + struct.pack(">q", 5)
        + b"\x02"  # one member
        + compact("m")
        + b"\x00"
        + compact("c")
        + compact("/h")
        + struct.pack(">ii", 100, 50)
        + b"\x02s"
        + b"\x02a"
        + b"\x00"  # member's tagged fields
        + b"\x00"  # value's tagged fields
    )
    assert decode_group_value(data) == StoredGroup(
        "consumer", 2, "range", None, 5, (StoredMember("m", None, "c", "/h", 100, 50, b"s", b"a"),)
    )
