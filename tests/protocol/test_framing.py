from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol.errors import FrameTooLargeError, ProtocolError
from tributary.protocol.framing import FrameDecoder, frame


@given(payloads=st.lists(st.binary(max_size=300), max_size=20), cuts=st.lists(st.integers(1, 64), min_size=1))
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        decoder.feed(stream[pos : pos + step])
        out.extend(decoder.frames())
        pos += step
        i += 1
    assert out == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_refused_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    decoder.feed((1025).to_bytes(4, "big"))
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()


def test_frame_at_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_size=16)
    decoder.feed(frame(b"x" * 16))
    assert decoder.next_frame() == b"x" * 16


def test_negative_length_is_a_protocol_error() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\xff\xff\xff\xfe")
    with pytest.raises(ProtocolError):
        decoder.next_frame()


def test_partial_frame_waits() -> None:
    decoder = FrameDecoder()
    decoder.feed(frame(b"hello")[:6])
    assert decoder.next_frame() is None
    assert decoder.buffered == 6


def test_length_is_known_from_the_prefix_before_the_body() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    whole = frame(b"x" * 100)
    decoder.feed(whole[:3])
    assert decoder.next_length() is None
    assert decoder.missing == 1
    decoder.feed(whole[3:10])
    assert decoder.next_length() == 100
    assert decoder.missing == 94
    decoder.feed(whole[10:] + frame(b"next")[:2])
    assert decoder.missing == 0
    assert decoder.next_frame() == b"x" * 100
    assert decoder.next_length() is None
    assert decoder.missing == 2


def test_oversized_length_is_refused_from_the_prefix() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    decoder.feed((1025).to_bytes(4, "big"))
    with pytest.raises(FrameTooLargeError):
        decoder.next_length()


def test_a_length_prefix_split_over_four_chunks_is_read() -> None:
    decoder = FrameDecoder()
    whole = frame(b"abc") + frame(b"")
    for i in range(len(whole)):
        decoder.feed(whole[i : i + 1])
    assert decoder.next_length() == 3
    assert list(decoder.frames()) == [b"abc", b""]
    assert decoder.buffered == 0


def test_chunks_the_caller_may_reuse_are_copied() -> None:
    decoder = FrameDecoder()
    buffer = bytearray(frame(b"hello"))
    decoder.feed(buffer[:6])
    view = memoryview(buffer)[6:]
    decoder.feed(view)
    buffer[:] = b"x" * len(buffer)
    assert decoder.next_frame() == b"hello"


@settings(max_examples=50, deadline=None)
@given(sizes=st.lists(st.integers(0, 300_000), max_size=6), chunk=st.integers(1000, 70_000))
def test_large_frames_come_out_whole_and_as_bytes(sizes: list[int], chunk: int) -> None:
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame_size=300_000)
    out: list[bytes] = []
    for pos in range(0, len(stream), chunk):
        decoder.feed(stream[pos : pos + chunk])
        out.extend(decoder.frames())
    assert out == payloads
    assert all(type(p) is bytes for p in out)
    assert decoder.buffered == 0


@given(
    before=st.lists(st.binary(max_size=50), max_size=3),
    payload=st.binary(min_size=1, max_size=400),
    cuts=st.lists(st.integers(1, 64), min_size=1),
    data=st.data(),
)
def test_an_incomplete_frame_is_moved_with_what_has_arrived(
    before: list[bytes], payload: bytes, cuts: list[int], data: st.DataObject
) -> None:
    """A frame begun but not whole comes out as a buffer of its length holding exactly the
    bytes that arrived, in order, whatever the chunks; the rest received into it completes it."""
    stream = b"".join(frame(p) for p in before) + frame(payload)
    stop = data.draw(st.integers(len(stream) - len(payload), len(stream) - 1), label="bytes arrived")
    decoder = FrameDecoder()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < stop:
        step = min(cuts[i % len(cuts)], stop - pos)
        decoder.feed(stream[pos : pos + step])
        out.extend(decoder.frames())
        pos += step
        i += 1
    assert out == before
    assert decoder.next_length() == len(payload)
    buffer = bytearray(len(payload))
    filled = decoder.move_incomplete(buffer)
    assert filled == stop - (len(stream) - len(payload))
    assert bytes(buffer[:filled]) == payload[:filled]
    assert decoder.buffered == 0
    assert decoder.next_length() is None
    buffer[filled:] = payload[filled:]
    assert buffer == payload


def test_move_incomplete_refuses_a_whole_or_absent_frame_or_a_wrong_buffer() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ValueError, match="no incomplete frame"):
        decoder.move_incomplete(bytearray(5))
    decoder.feed(frame(b"whole"))
    with pytest.raises(ValueError, match="no incomplete frame"):
        decoder.move_incomplete(bytearray(5))
    assert decoder.next_frame() == b"whole"
    decoder.feed(frame(b"partial")[:6])
    with pytest.raises(ValueError, match="a buffer of 6 bytes for a frame of 7"):
        decoder.move_incomplete(bytearray(6))
    assert decoder.buffered == 6
