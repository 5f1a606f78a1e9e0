from __future__ import annotations

import pytest
from hypothesis import given
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
