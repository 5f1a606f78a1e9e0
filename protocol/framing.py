"""Kafka framing: every request and response is an int32 length, then that many bytes.

:class:`FrameDecoder` is fed whatever chunks the transport delivers and hands
back whole frames. It refuses a length above its maximum before buffering the
frame, so a hostile length prefix costs nothing but the connection.
"""

from __future__ import annotations

import struct
from collections import deque
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

    The chunks are kept as they came (a queue, and a position in the first), not
    appended to one growing buffer: a frame is copied once, when it is whole,
    out of the chunks it spans (sliced out of one chunk, or joined from several).
    A growing ``bytearray`` cost about ten copies' worth per byte of a
    megabytes-long fetch response (reallocation and page faults at every frame);
    this costs one. A stream of small frames is O(n) as well: each is sliced out
    of the chunk that holds it, and a chunk is dropped once read to its end.
    """

    __slots__ = ("_buffered", "_chunks", "_head", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._chunks: deque[bytes] = deque()
        #: Where the unread bytes start in the first chunk.
        self._head = 0
        self._buffered = 0
        self.max_frame_size = max_frame_size

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return self._buffered

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        # Kept by reference: transports hand over fresh bytes objects (anything else is
        # copied, since its owner could change it before the frame is whole).
        self._chunks.append(data if type(data) is bytes else bytes(data))
        self._buffered += len(data)

    def next_length(self) -> int | None:
        """The length of the next frame once its prefix is here, else None. A reader
        that budgets memory learns a frame's size here, before receiving its body."""
        if self._buffered < 4:
            return None
        first = self._chunks[0]
        head = self._head
        if len(first) - head >= 4:
            (length,) = _LENGTH.unpack_from(first, head)
        else:  # the prefix spans chunks
            (length,) = _LENGTH.unpack(self._peek(4))
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
        return 4 - self._buffered if length is None else max(4 + length - self._buffered, 0)

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more bytes arrive."""
        length = self.next_length()
        if length is None or self._buffered < 4 + length:
            return None
        first = self._chunks[0]
        head = self._head
        end = head + 4 + length
        if end <= len(first):  # the usual case for small frames: one slice, one copy
            payload = first[head + 4 : end]
            self._advance_within(first, end)
            self._buffered -= 4 + length
            return payload
        self._skip(4)
        return self._take(length)

    def frames(self) -> Iterator[bytes]:
        """Every whole frame buffered so far."""
        while (payload := self.next_frame()) is not None:
            yield payload

    def move_incomplete(self, buffer: bytearray | memoryview) -> int:
        """Move the bytes buffered of the next frame, begun but not whole, into ``buffer`` (of
        exactly the frame's length, :meth:`next_length`); how many that is. The decoder is
        left empty. The caller receives the rest of the frame straight into ``buffer``
        (``recv_into``), so a large frame is copied once, by the kernel, instead of arriving
        in chunks that are then joined."""
        length = self.next_length()
        if length is None or self._buffered >= 4 + length:
            raise ValueError("no incomplete frame is buffered")
        if len(buffer) != length:
            raise ValueError(f"a buffer of {len(buffer)} bytes for a frame of {length}")
        self._skip(4)
        filled = 0
        head = self._head
        for chunk in self._chunks:
            end = filled + len(chunk) - head
            buffer[filled:end] = memoryview(chunk)[head:]
            filled = end
            head = 0
        self._chunks.clear()
        self._head = 0
        self._buffered = 0
        return filled

    # --- the chunk queue ---------------------------------------------------------------------

    def _advance_within(self, first: bytes, end: int) -> None:
        if end == len(first):
            self._chunks.popleft()
            self._head = 0
        else:
            self._head = end

    def _peek(self, n: int) -> bytes:
        """The next ``n`` buffered bytes (``n`` small), leaving them buffered."""
        out = b""
        head = self._head
        for chunk in self._chunks:
            out += chunk[head : head + n - len(out)]
            head = 0
            if len(out) == n:
                break
        return out

    def _skip(self, n: int) -> None:
        self._take(n)

    def _take(self, n: int) -> bytes:
        """The next ``n`` buffered bytes, removed from the buffer: one copy."""
        if n == 0:
            return b""
        chunks = self._chunks
        head = self._head
        first = chunks[0]
        if len(first) - head >= n:
            payload = first if head == 0 and n == len(first) else first[head : head + n]
            self._advance_within(first, head + n)
        else:
            parts: list[bytes | memoryview] = []
            need = n
            while need:
                chunk = chunks[0]
                available = len(chunk) - head
                if available <= need:
                    parts.append(memoryview(chunk)[head:] if head else chunk)
                    chunks.popleft()
                    head = 0
                    need -= available
                else:
                    parts.append(memoryview(chunk)[head : head + need])
                    head += need
                    need = 0
            self._head = head
            payload = b"".join(parts)
        self._buffered -= n
        return payload
