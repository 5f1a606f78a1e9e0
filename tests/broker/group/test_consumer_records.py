"""The consumer group records of ``__consumer_offsets``, byte for byte as Kafka 4.0's JSON
schemas lay them out (group-coordinator/src/main/resources/common/message/ConsumerGroup*)."""

from __future__ import annotations

import struct
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.broker.group.consumer_records import (
    ClassicMemberMetadata,
    ConsumerRecordError,
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberMetadataKey,
    MemberMetadataValue,
    RegularExpressionKey,
    RegularExpressionValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadata,
    decode_value,
    encode_key,
    encode_value,
)
from tributary.broker.group.records import decode_key

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


def test_key_layouts() -> None:
    cases = [
        (GroupEpochKey("grp"), 3, s("grp")),
        (SubscriptionMetadataKey("grp"), 4, s("grp")),
        (MemberMetadataKey("grp", "m1"), 5, s("grp") + s("m1")),
        (TargetAssignmentEpochKey("grp"), 6, s("grp")),
        (TargetAssignmentMemberKey("grp", "m1"), 7, s("grp") + s("m1")),
        (CurrentAssignmentKey("grp", "m1"), 8, s("grp") + s("m1")),
        (RegularExpressionKey("grp", "a.*"), 16, s("grp") + s("a.*")),
    ]
    for key, version, body in cases:
        data = encode_key(key)
        assert data == struct.pack(">h", version) + body
        assert decode_key(data) == key


def test_group_epoch_value_layout() -> None:
    data = encode_value(GroupEpochValue(7))
    # int16 version 0, epoch int32, an empty tagged-field section.
    assert data == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    assert decode_value(GroupEpochKey("g"), data) == GroupEpochValue(7)


def test_current_assignment_value_layout() -> None:
    value = CurrentAssignmentValue(5, 4, 1, {TOPIC: frozenset({2, 0})}, {TOPIC: frozenset({1})})
    data = encode_value(value)
    topic = lambda *ps: TOPIC.bytes + bytes([len(ps) + 1]) + b"".join(struct.pack(">i", p) for p in ps) + b"\x00"  # noqa: E731
    expected = (
        b"\x00\x00"
        + struct.pack(">iib", 5, 4, 1)
        + b"\x02" + topic(0, 2)
        + b"\x02" + topic(1)
        + b"\x00"
    )  # fmt: skip
    assert data == expected
    assert decode_value(CurrentAssignmentKey("g", "m"), data) == value


def test_member_metadata_value_layout_with_classic_metadata_as_tag_0() -> None:
    classic = ClassicMemberMetadata(45000, (("range", b"\x00\x01"),))
    value = MemberMetadataValue(None, "r1", "cid", "/1.2.3.4", ("a", "b"), None, 300000, "uniform", classic)
    data = encode_value(value)
    tagged = struct.pack(">i", 45000) + b"\x02" + compact("range") + b"\x03\x00\x01" + b"\x00" + b"\x00"
    expected = (
        b"\x00\x00"
        + compact(None) + compact("r1") + compact("cid") + compact("/1.2.3.4")
        + b"\x03" + compact("a") + compact("b")
        + compact(None) + struct.pack(">i", 300000) + compact("uniform")
        + b"\x01" + b"\x00" + bytes([len(tagged)]) + tagged
    )  # fmt: skip
    assert data == expected
    assert decode_value(MemberMetadataKey("g", "m"), data) == value


def test_subscription_metadata_value_layout() -> None:
    value = SubscriptionMetadataValue((TopicMetadata(TOPIC, "orders", 16),))
    data = encode_value(value)
    topic = TOPIC.bytes + compact("orders") + struct.pack(">i", 16) + b"\x01" + b"\x00"  # no racks, no tags
    assert data == b"\x00\x00" + b"\x02" + topic + b"\x00"
    assert decode_value(SubscriptionMetadataKey("g"), data) == value


def test_unknown_tags_are_skipped_and_bad_values_refused() -> None:
    data = encode_value(TargetAssignmentEpochValue(3))
    with_tag = data[:-1] + b"\x01\x05\x02zz"
    assert decode_value(TargetAssignmentEpochKey("g"), with_tag) == TargetAssignmentEpochValue(3)
    for bad in (b"", b"\x00\x01" + data[2:], data[:3]):
        try:
            decode_value(TargetAssignmentEpochKey("g"), bad)
        except ConsumerRecordError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


uuids = st.builds(uuid.UUID, st.uuids().map(str))
assignments = st.dictionaries(uuids, st.frozensets(st.integers(0, 2**31 - 1), min_size=1), max_size=4)
texts = st.text(max_size=20)


@settings(max_examples=60)
@given(
    st.one_of(
        st.builds(GroupEpochValue, st.integers(-(2**31), 2**31 - 1)),
        st.builds(TargetAssignmentEpochValue, st.integers(-1, 2**31 - 1)),
        st.builds(TargetAssignmentMemberValue, assignments),
        st.builds(
            CurrentAssignmentValue,
            st.integers(-2, 1000),
            st.integers(-2, 1000),
            st.integers(0, 127),
            assignments,
            assignments,
        ),
        st.builds(
            MemberMetadataValue,
            st.none() | texts,
            st.none() | texts,
            texts,
            texts,
            st.lists(texts, max_size=3).map(tuple),
            st.none() | texts,
            st.integers(-1, 2**31 - 1),
            st.none() | texts,
            st.none()
            | st.builds(
                ClassicMemberMetadata,
                st.integers(0, 2**31 - 1),
                st.lists(st.tuples(texts, st.binary(max_size=30)), max_size=3).map(tuple),
            ),
        ),
        st.builds(
            SubscriptionMetadataValue,
            st.lists(st.builds(TopicMetadata, uuids, texts, st.integers(0, 10000)), max_size=3).map(tuple),
        ),
        st.builds(
            RegularExpressionValue, st.lists(texts, max_size=3).map(tuple), st.integers(0, 99), st.integers(0, 99)
        ),
    )
)
def test_every_value_round_trips(value: object) -> None:
    key = {
        GroupEpochValue: GroupEpochKey("g"),
        TargetAssignmentEpochValue: TargetAssignmentEpochKey("g"),
        TargetAssignmentMemberValue: TargetAssignmentMemberKey("g", "m"),
        CurrentAssignmentValue: CurrentAssignmentKey("g", "m"),
        MemberMetadataValue: MemberMetadataKey("g", "m"),
        SubscriptionMetadataValue: SubscriptionMetadataKey("g"),
        RegularExpressionValue: RegularExpressionKey("g", "r"),
    }[type(value)]
    assert decode_value(key, encode_value(value)) == value  # type: ignore[arg-type]
