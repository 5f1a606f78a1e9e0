"""Kafka framing: every request and response is an int32 length, then that many bytes.

:class:`FrameDecoder` is fed whatever chunks the transport delivers and hands
back whole frames. It refuses a length above its maximum before buffering the
frame, so a hostile length prefix costs nothing but the connection.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from tributary.protocol.errors import FrameTooLargeError, ProtocolError

_LENGTH = struct.Struct(">i")

#: Kafka's default ``socket.request.max.bytes``.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its length."""
    return _LENGTH.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Reassembles frames from arbitrary chunks.

    The buffer is compacted only once the consumed prefix outweighs what is
    left, so a stream of small frames costs O(n) overall.
    """

    __slots__ = ("_buf", "_pos", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame_size = max_frame_size

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next_length(self) -> int | None:
        """The length of the next frame once its prefix is here, else None. A reader
        that budgets memory learns a frame's size here, before receiving its body."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (length,) = _LENGTH.unpack_from(buf, pos)
        if length < 0:
            raise ProtocolError(f"negative frame length {length}")
        if length > self.max_frame_size:
            raise FrameTooLargeError(f"frame of {length} bytes exceeds the limit of {self.max_frame_size}")
        return int(length)

    @property
    def missing(self) -> int:
        """Bytes still to arrive before the next frame is whole (the rest of its
        length prefix, while that is incomplete)."""
        length = self.next_length()
        return 4 - self.buffered if length is None else max(4 + length - self.buffered, 0)

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more bytes arrive."""
        length = self.next_length()
        if length is None:
            return None
        buf, pos = self._buf, self._pos
        end = pos + 4 + length
        if len(buf) < end:
            return None
        # One copy, straight out of the buffer (slicing the bytearray first would make two).
        payload = bytes(memoryview(buf)[pos + 4 : end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end > len(buf) - end:
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end
        return payload

    def frames(self) -> Iterator[bytes]:
        """Every whole frame buffered so far."""
        while (payload := self.next_frame()) is not None:
            yield payload
