"""CRC-32C (Castagnoli), the checksum of record batches in message format v2.

One function, :func:`crc32c`, backed by the fastest implementation present:
the ``crc32c`` package (SSE4.2/ARMv8 instructions, tens of times faster) when
importable, else ``crcmod``, which is a required dependency and always works.
Both accept any contiguous buffer (bytes, bytearray, memoryview) without
copying it. ``value`` continues a running CRC, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

import crcmod.predefined

BytesLike: TypeAlias = bytes | bytearray | memoryview


class CrcFunction(Protocol):
    def __call__(self, data: BytesLike, value: int = 0, /) -> int: ...


_crcmod_fun = crcmod.predefined.mkCrcFun("crc-32c")


def crc32c_crcmod(data: BytesLike, value: int = 0, /) -> int:
    """CRC-32C through crcmod (table driven, always available)."""
    return int(_crcmod_fun(data, value))


crc32c_hardware: CrcFunction | None
try:
    import crc32c as _package
except ImportError:
    crc32c_hardware = None
    IMPLEMENTATION = "crcmod"
else:
    crc32c_hardware = _package.crc32c
    # Without the CPU instruction the package uses its own table: still faster
    # than crcmod, but benchmarks should be able to tell the two apart.
    IMPLEMENTATION = "crc32c (hardware)" if _package.hardware_based else "crc32c (software)"

crc32c: CrcFunction = crc32c_hardware if crc32c_hardware is not None else crc32c_crcmod

__all__ = ["IMPLEMENTATION", "BytesLike", "CrcFunction", "crc32c", "crc32c_crcmod", "crc32c_hardware"]
