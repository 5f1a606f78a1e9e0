"""Hostile input: every decoder raises ProtocolError (or a subclass) and nothing else.

A server catches ProtocolError and closes that one connection; any other
exception (IndexError, struct.error, UnicodeDecodeError, MemoryError,
RecursionError, OverflowError, ...) escaping a decoder would be a bug. The
inputs are random bytes, and truncations, bit flips and splices of valid
encodings, for every declared message at every declared version, and for
every supported request through the server's path (frame, header, body).
Lengths read from the input must never allocate more than the input holds.
"""

from __future__ import annotations

import functools
import struct
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tributary.protocol import codec, headers
from tributary.protocol.errors import FrameTooLargeError, ProtocolError
from tributary.protocol.framing import FrameDecoder, frame
from tributary.protocol.messages import (
    API_MESSAGES,
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CreateTopicsResponse,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
    ResponseHeader,
)
from tributary.protocol.primitives import Reader
from tributary.protocol.schema import Field, Struct
from tributary.protocol.supported import SUPPORTED_VERSIONS

from .strategies import instances

ALL_CLASSES: list[Any] = [cls for pair in API_MESSAGES.values() for cls in pair] + [
    RequestHeader,
    ResponseHeader,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
]


def _versions(cls: Any) -> range:
    return range(cls.SPEC.valid.lo, cls.SPEC.valid.hi + 1)


DECLARED = [(cls, v) for cls in ALL_CLASSES for v in _versions(cls)]
SUPPORTED = [(key, v) for key, vs in SUPPORTED_VERSIONS.items() for v in range(vs.lo, (vs.hi or 0) + 1)]


def fuzz(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def only_protocol_errors(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; a ProtocolError is an acceptable answer to hostile bytes, anything else propagates."""
    try:
        return fn()
    except ProtocolError:
        return None


def decode_request(payload: bytes) -> Any:
    """What a server does with a frame's payload."""
    envelope = headers.decode_request_header(payload)
    return headers.decode_request_body(envelope, payload)


# --- mutations of valid bytes ---


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few random edits: bit flips, byte overwrites, deletions, insertions, truncation."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "delete", "insert", "truncate"]))
        if kind == "insert" or not buf:
            at = draw(st.integers(0, len(buf)))
            buf[at:at] = draw(st.binary(min_size=1, max_size=6))
            continue
        at = draw(st.integers(0, len(buf) - 1))
        if kind == "flip":
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            buf[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif kind == "delete":
            del buf[at : at + draw(st.integers(1, 4))]
        else:
            del buf[at:]
    return bytes(buf)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    out, pos, i = [], 0, 0
    while pos < len(data):
        step = cuts[i % len(cuts)] if cuts else len(data)
        out.append(data[pos : pos + step])
        pos += step
        i += 1
    return out


def _reference_frames(stream: bytes, max_frame_size: int) -> tuple[list[bytes], bool]:
    """(whole frames at the start of ``stream``, whether a bad length prefix follows them)."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (length,) = struct.unpack_from(">i", stream, pos)
        if length < 0 or length > max_frame_size:
            return frames, True
        if len(stream) - pos - 4 < length:
            break
        frames.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return frames, False


def _run_decoder(stream: bytes, cuts: list[int], max_frame_size: int) -> tuple[list[bytes], bool]:
    decoder = FrameDecoder(max_frame_size=max_frame_size)
    out: list[bytes] = []
    try:
        for chunk in _chunks(stream, cuts):
            decoder.feed(chunk)
            out.extend(decoder.frames())
    except ProtocolError:
        return out, True
    return out, False


# --- (a) framing ---


@fuzz(300)
@given(
    stream=st.binary(max_size=400),
    cuts=st.lists(st.integers(1, 40), max_size=8),
    max_frame_size=st.sampled_from([0, 7, 64, 1024, 100 * 1024 * 1024]),
)
def test_frame_decoder_on_random_bytes(stream: bytes, cuts: list[int], max_frame_size: int) -> None:
    assert _run_decoder(stream, cuts, max_frame_size) == _reference_frames(stream, max_frame_size)


@st.composite
def request_streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A stream of valid request frames (and their payloads) for supported versions."""
    payloads = []
    for _ in range(draw(st.integers(1, 3))):
        key, version = draw(st.sampled_from(SUPPORTED))
        body = draw(instances(API_MESSAGES[key][0], version))
        framed = headers.encode_request(body, version, draw(st.integers(-(2**31), 2**31 - 1)), "fuzz")
        payloads.append(framed[4:])
    return b"".join(frame(p) for p in payloads), payloads


@fuzz(150)
@given(case=request_streams(), cuts=st.lists(st.integers(1, 64), max_size=8), data=st.data())
def test_server_path_on_mutated_request_streams(case: tuple[bytes, list[bytes]], cuts: list[int], data: Any) -> None:
    stream, payloads = case
    # Intact, the stream splits back into its frames, each of which decodes.
    assert _run_decoder(stream, cuts, 1 << 20) == (payloads, False)
    for payload in payloads:
        assert decode_request(payload) is not None
    # Mutated, framing and decoding raise nothing but ProtocolError.
    hostile = data.draw(mutated(stream))
    frames, refused = _run_decoder(hostile, cuts, 1 << 20)
    assert (frames, refused) == _reference_frames(hostile, 1 << 20)
    for payload in frames:
        only_protocol_errors(functools.partial(decode_request, payload))


# --- (b) headers and bodies ---


@fuzz(300)
@given(target=st.sampled_from(SUPPORTED), tail=st.binary(max_size=200))
def test_request_path_on_random_bytes(target: tuple[int, int], tail: bytes) -> None:
    key, version = target
    # Aimed at one API and version: a plausible key and version, then noise.
    only_protocol_errors(lambda: decode_request(struct.pack(">hh", key, version) + tail))
    # And pure noise, which names any key and version.
    only_protocol_errors(lambda: decode_request(tail))


@fuzz(200)
@given(key=st.integers(-(2**15), 2**15 - 1), version=st.integers(-(2**15), 2**15 - 1), tail=st.binary(max_size=40))
def test_unknown_keys_and_versions(key: int, version: int, tail: bytes) -> None:
    payload = struct.pack(">hhi", key, version, 7) + b"\x00\x02id" + tail
    envelope = only_protocol_errors(lambda: headers.decode_request_header(payload))
    if envelope is not None:
        only_protocol_errors(lambda: headers.decode_request_body(envelope, payload))
    only_protocol_errors(lambda: headers.decode_response(key, version, tail))


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
@fuzz(30)
@given(data=st.data(), noise=st.binary(max_size=120))
def test_declared_messages_on_random_and_mutated_bytes(cls: Any, data: Any, noise: bytes) -> None:
    version = data.draw(st.sampled_from(_versions(cls)), label="version")
    decoded = only_protocol_errors(lambda: codec.decode(cls, noise, version))
    assert decoded is None or isinstance(decoded, cls)
    valid = codec.encode(data.draw(instances(cls, version), label="value"), version)
    hostile = data.draw(mutated(valid), label="hostile")
    decoded = only_protocol_errors(lambda: codec.decode(cls, hostile, version))
    assert decoded is None or isinstance(decoded, cls)


@pytest.mark.parametrize(("key", "version"), SUPPORTED, ids=[f"{ApiKey(k).name}-v{v}" for k, v in SUPPORTED])
@fuzz(12)
@given(data=st.data())
def test_supported_responses_on_mutated_frames(key: ApiKey, version: int, data: Any) -> None:
    # The client's path: a response frame's payload, mutated.
    body = data.draw(instances(API_MESSAGES[key][1], version))
    payload = headers.encode_response(body, version, 3)[4:]
    assert headers.decode_response(key, version, payload) == (3, body)
    hostile = data.draw(mutated(payload))
    only_protocol_errors(lambda: headers.decode_response(key, version, hostile))


# --- (b') exhaustive, deterministic: every truncation and several corruptions of a full encoding ---


def _filled_scalar(type_: str, i: int) -> Any:
    values: dict[str, Any] = {
        "bool": True,
        "int8": -1 - i if i % 2 else 1 + i,
        "uint16": 1 + i,
        "uint32": 1 + i,
        "float64": 0.5,
        "string": "é" * (1 + i % 3),  # multi-byte UTF-8, so a cut can split a character
        "bytes": bytes(range(i % 5 + 1)),
        "uuid": uuid.UUID(int=0x0123_4567_89AB_CDEF + i),
    }
    values["int16"] = values["int32"] = values["int64"] = values["int8"]
    values["records"] = values["bytes"]
    return values[type_]


def filled(struct: Struct, version: int) -> Any:
    """A value with every field present at ``version`` set and non-default (tagged ones too)."""

    def value(f: Field, i: int) -> Any:
        if f.struct is not None:
            return [filled(f.struct, version), filled(f.struct, version)] if f.is_array else filled(f.struct, version)
        if f.is_array:
            return [_filled_scalar(f.element_type, i), _filled_scalar(f.element_type, i + 1)]
        return _filled_scalar(f.type, i)

    return struct.cls(**{f.attr: value(f, i) for i, f in enumerate(struct.fields) if version in f.versions})


FULL = [
    pytest.param(cls, v, codec.encode(filled(cls.SPEC.struct, v), v), id=f"{cls.__name__}-v{v}") for cls, v in DECLARED
]


@pytest.mark.parametrize(("cls", "version", "encoded"), FULL)
def test_every_truncation_and_corruption(cls: Any, version: int, encoded: bytes) -> None:
    assert codec.decode(cls, encoded, version) == filled(cls.SPEC.struct, version)
    # Decoding reads exactly the bytes the encoding holds, so every proper prefix is short.
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            codec.decode(cls, encoded[:cut], version)
    # Overwrite each byte with values that make lengths null, negative, huge or unterminated.
    buf = bytearray(encoded)
    for at in range(len(buf)):
        original = buf[at]
        for replacement in (0x00, 0x7F, 0x80, 0xFF):
            buf[at] = replacement
            only_protocol_errors(lambda: codec.decode(cls, buf, version))
        buf[at] = original


def test_full_encodings_cover_every_declared_version() -> None:
    assert len(FULL) == len(DECLARED) == sum(len(_versions(cls)) for cls in ALL_CLASSES)
    assert {key for key, _ in SUPPORTED} == set(API_MESSAGES)


@pytest.mark.parametrize(("key", "version"), SUPPORTED, ids=[f"{ApiKey(k).name}-v{v}" for k, v in SUPPORTED])
def test_every_truncation_of_a_full_request_frame(key: ApiKey, version: int) -> None:
    request_cls: Any = API_MESSAGES[key][0]
    body = filled(request_cls.SPEC.struct, version)
    payload = headers.encode_request(body, version, 99, "client-é")[4:]
    assert decode_request(payload) == body
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode_request(payload[:cut])


# --- (c) lengths from the wire never allocate ---


def _fails_without_allocating(fn: Callable[[], Any], budget: int = 64 * 1024) -> ProtocolError:
    """``fn`` raises ProtocolError, and allocates under ``budget`` bytes on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as info:
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < budget, f"decoding a short hostile input allocated {peak} bytes"
    return info.value


def _warm_up() -> None:
    # Compile the plans the hostile inputs use, so tracemalloc sees only the decode.
    for cls, version in [(MetadataRequest, 1), (ProduceRequest, 3), (ApiVersionsRequest, 3), (MetadataRequest, 9)]:
        decode_request(headers.encode_request(cls(), version, 1, "c")[4:])
    for version in (0, 3):
        codec.decode(ApiVersionsResponse, codec.encode(ApiVersionsResponse(), version), version)
    codec.decode(CreateTopicsResponse, codec.encode(CreateTopicsResponse(), 5), 5)


def _request_header(key: int, version: int) -> bytes:
    return struct.pack(">hhi", key, version, 1) + b"\x00\x01c"


def test_array_of_two_billion_elements_in_a_tiny_frame() -> None:
    _warm_up()
    payload = _request_header(ApiKey.METADATA, 1) + struct.pack(">i", 2**31 - 1) + b"\x00\x03abc"
    assert len(payload) == 20
    err = _fails_without_allocating(lambda: decode_request(payload))
    assert "2147483647" in str(err)


def test_compact_array_of_huge_length() -> None:
    _warm_up()
    for length in (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"):  # 2**32 - 1, 2**64 - 1
        body = b"\x00\x00" + length + b"\x00\x12\x00\x00"  # error code, then api_keys
        _fails_without_allocating(functools.partial(codec.decode, ApiVersionsResponse, body, 3))


def test_string_of_30000_bytes_in_a_20_byte_frame() -> None:
    _warm_up()
    # The client id claims 30000 bytes.
    payload = struct.pack(">hhih", ApiKey.METADATA, 1, 1, 30000) + b"x" * 10
    assert len(payload) == 20
    _fails_without_allocating(lambda: decode_request(payload))
    # A topic name claims 30000 bytes.
    payload = _request_header(ApiKey.METADATA, 1) + struct.pack(">ih", 1, 30000) + b"abc"
    _fails_without_allocating(lambda: decode_request(payload))
    # A compact string (flexible ApiVersions v3 body) claims 2**62 bytes.
    payload = _request_header(ApiKey.API_VERSIONS, 3) + b"\x00" + b"\x80" * 8 + b"\x40" + b"ab"
    _fails_without_allocating(lambda: decode_request(payload))


def test_bytes_of_two_gigabytes_in_a_tiny_frame() -> None:
    _warm_up()
    # transactional id null, acks, timeout, one topic "t" with one partition whose records claim 2**31 - 1 bytes
    body = struct.pack(">hhii", -1, 1, 1000, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, 2**31 - 1) + b"rec"
    payload = _request_header(ApiKey.PRODUCE, 3) + body
    _fails_without_allocating(lambda: decode_request(payload))


def test_tagged_fields_claiming_more_than_the_frame() -> None:
    _warm_up()
    # A tagged field of 2**31 bytes, in an ApiVersions v3 response's tag section.
    body = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00" + b"\x80\x80\x80\x80\x08" + b"xx"
    _fails_without_allocating(lambda: codec.decode(ApiVersionsResponse, body, 3))
    # A tag section claiming 2**32 - 1 fields, with room for none.
    body = b"\x00\x00\x01\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f"
    _fails_without_allocating(lambda: codec.decode(ApiVersionsResponse, body, 3))
    # The request header's own tag section.
    payload = _request_header(ApiKey.METADATA, 9) + b"\x01\x00\xff\xff\xff\xff\x07"
    _fails_without_allocating(lambda: decode_request(payload))


def test_unterminated_varint() -> None:
    _warm_up()
    for tail in (b"\xff" * 11, b"\x80" * 30, b"\xff"):
        payload = _request_header(ApiKey.API_VERSIONS, 3) + b"\x00" + tail
        _fails_without_allocating(functools.partial(decode_request, payload))
        with pytest.raises(ProtocolError):
            Reader(tail).unsigned_varint()


def test_frame_length_of_two_gigabytes_is_refused_before_buffering() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", 2**31 - 1) + b"abc")
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
    assert decoder.buffered == 7


@pytest.mark.parametrize(("cls", "version", "encoded"), FULL)
def test_huge_length_at_every_position(cls: Any, version: int, encoded: bytes) -> None:
    """Splice a maximal int32 and a maximal varint at every offset of a full encoding."""
    for at in range(len(encoded) + 1):
        for huge in (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x07"):
            hostile = encoded[:at] + huge + encoded[at + len(huge) :]
            only_protocol_errors(functools.partial(codec.decode, cls, hostile, version))
