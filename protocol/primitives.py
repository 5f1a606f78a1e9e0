"""Kafka's primitive wire types: a :class:`Reader` and a :class:`Writer`.

Fixed-width integers are big-endian. ``varint``/``varlong`` are zig-zag
encoded (record fields); ``unsigned_varint`` is plain LEB128 (lengths in
flexible versions). Classic strings and bytes carry an int16/int32 length,
``-1`` meaning null; their compact forms carry ``unsigned_varint(length + 1)``,
``0`` meaning null.

Every read checks bounds against the buffer and raises :class:`ProtocolError`;
no length taken from the input is trusted to allocate more than the bytes
actually present.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sized

from tributary.protocol.errors import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# A varint of a 64-bit value takes at most 10 bytes.
_MAX_VARINT_BYTES = 10

NULL_UUID = uuid.UUID(int=0)


def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_unsigned_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 32- or 64-bit value (the encodings coincide)."""
    return encode_unsigned_varint(zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF)


def varint_size(value: int) -> int:
    z = zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


class Reader:
    """Reads primitives from a buffer, advancing ``pos``."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise ProtocolError(
                f"truncated input: {what} needs {n} bytes at offset {self.pos}, {self.end - self.pos} left"
            )

    def _fixed(self, s: struct.Struct, what: str) -> int:
        self._need(s.size, what)
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(value)

    def int8(self) -> int:
        return self._fixed(_I8, "int8")

    def int16(self) -> int:
        return self._fixed(_I16, "int16")

    def uint16(self) -> int:
        return self._fixed(_U16, "uint16")

    def int32(self) -> int:
        return self._fixed(_I32, "int32")

    def uint32(self) -> int:
        return self._fixed(_U32, "uint32")

    def int64(self) -> int:
        return self._fixed(_I64, "int64")

    def float64(self) -> float:
        self._need(8, "float64")
        (value,) = _F64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return float(value)

    def boolean(self) -> bool:
        return self._fixed(_I8, "bool") != 0

    def unsigned_varint(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        value = 0
        shift = 0
        for i in range(_MAX_VARINT_BYTES):
            if pos + i >= end:
                raise ProtocolError(f"truncated input: varint at offset {self.pos}")
            byte = buf[pos + i]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos + i + 1
                return value
            shift += 7
        raise ProtocolError(f"varint longer than {_MAX_VARINT_BYTES} bytes at offset {self.pos}")

    def varint(self) -> int:
        return zigzag_decode(self.unsigned_varint())

    # varlong shares the zig-zag encoding; only the range differs.
    varlong = varint

    def uuid(self) -> uuid.UUID:
        self._need(16, "uuid")
        value = uuid.UUID(bytes=bytes(self.buf[self.pos : self.pos + 16]))
        self.pos += 16
        return value

    def raw(self, n: int, what: str = "bytes") -> memoryview:
        """A zero-copy view of the next ``n`` bytes."""
        self._need(n, what)
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def _text(self, n: int) -> str:
        try:
            return str(self.raw(n, "string"), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string at offset {self.pos - n} is not UTF-8: {exc}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError(f"non-nullable string has length {n}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"string has invalid length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.unsigned_varint() - 1
        if n < 0:
            raise ProtocolError("non-nullable compact string is null")
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.unsigned_varint() - 1
        if n < 0:
            return None
        return self._text(n)

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise ProtocolError(f"non-nullable bytes has length {n}")
        return bytes(self.raw(n))

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"bytes has invalid length {n}")
        return bytes(self.raw(n))

    def compact_bytes(self) -> bytes:
        n = self.unsigned_varint() - 1
        if n < 0:
            raise ProtocolError("non-nullable compact bytes is null")
        return bytes(self.raw(n))

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.unsigned_varint() - 1
        if n < 0:
            return None
        return bytes(self.raw(n))

    def array_length(self) -> int:
        """A classic array's length; -1 means null. Checked against the bytes left,
        since every element takes at least one byte... except empty structs, which
        Kafka does not declare."""
        n = self.int32()
        if n < -1:
            raise ProtocolError(f"array has invalid length {n}")
        if n > self.remaining:
            raise ProtocolError(f"array claims {n} elements but only {self.remaining} bytes remain")
        return n

    def compact_array_length(self) -> int:
        n = self.unsigned_varint() - 1
        if n > self.remaining:
            raise ProtocolError(f"array claims {n} elements but only {self.remaining} bytes remain")
        return n


class Writer:
    """Appends primitives to a growing ``bytearray``.

    A value the writer should not copy (a fetch response's records, which the
    broker sends from the page cache with sendfile) is *spliced*: its length is
    written, the object itself is recorded in ``splices`` with the position it
    belongs at, and the transport sends the pieces in order.
    """

    __slots__ = ("buf", "splices")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.splices: list[tuple[int, Sized]] = []

    def splice(self, value: Sized) -> None:
        self.splices.append((len(self.buf), value))

    @property
    def size(self) -> int:
        """Bytes written, spliced values included."""
        return len(self.buf) + sum(len(v) for _, v in self.splices)

    def parts(self) -> list[bytes | Sized]:
        """The output in order: byte strings between the spliced values."""
        out: list[bytes | Sized] = []
        start = 0
        for pos, value in self.splices:
            if pos > start:
                out.append(bytes(self.buf[start:pos]))
            out.append(value)
            start = pos
        if start < len(self.buf) or not out:
            out.append(bytes(self.buf[start:]))
        return out

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def int8(self, value: int) -> None:
        self.buf += _I8.pack(value)

    def int16(self, value: int) -> None:
        self.buf += _I16.pack(value)

    def uint16(self, value: int) -> None:
        self.buf += _U16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _I32.pack(value)

    def uint32(self, value: int) -> None:
        self.buf += _U32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _I64.pack(value)

    def float64(self, value: float) -> None:
        self.buf += _F64.pack(value)

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def unsigned_varint(self, value: int) -> None:
        self.buf += encode_unsigned_varint(value)

    def varint(self, value: int) -> None:
        self.buf += encode_varint(value)

    varlong = varint

    def uuid(self, value: uuid.UUID) -> None:
        self.buf += value.bytes

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def string(self, value: str) -> None:
        data = value.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes exceeds the int16 length limit")
        self.int16(len(data))
        self.buf += data

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
        else:
            self.string(value)

    def compact_string(self, value: str) -> None:
        data = value.encode()
        self.unsigned_varint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, value: str | None) -> None:
        if value is None:
            self.unsigned_varint(0)
        else:
            self.compact_string(value)

    def bytes_(self, value: bytes | bytearray | memoryview) -> None:
        self.int32(len(value))
        self.buf += value

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> None:
        if value is None:
            self.int32(-1)
        else:
            self.bytes_(value)

    def compact_bytes(self, value: bytes | bytearray | memoryview) -> None:
        self.unsigned_varint(len(value) + 1)
        self.buf += value

    def compact_nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> None:
        if value is None:
            self.unsigned_varint(0)
        else:
            self.compact_bytes(value)
