"""Tributary's sans-IO Kafka wire protocol: bytes in, objects out.

Nothing here opens a socket or touches trio (import-linter enforces it), so
every piece is testable with plain bytes. The layers, bottom up:

- ``primitives``: Kafka's primitive types (bounds-checked ``Reader``, ``Writer``)
- ``schema`` and ``messages``: every message declared once, as data, generated
  from Apache Kafka's JSON definitions; ``codec`` encodes and decodes them
- ``headers`` and ``framing``: request/response envelopes and the length prefix
- ``records``, ``compression``, ``crc32c``: record batch v2
- ``error_codes``, ``murmur2``, ``supported``: Kafka's error codes, the default
  partitioner, and the versions Tributary speaks

Malformed input raises :class:`ProtocolError` (or a subclass) and nothing else.
"""

from tributary.protocol.errors import (
    CodecUnavailableError,
    CorruptRecordError,
    FrameTooLargeError,
    ProtocolError,
    UnsupportedMagicError,
    UnsupportedVersionError,
)

__all__ = [
    "CodecUnavailableError",
    "CorruptRecordError",
    "FrameTooLargeError",
    "ProtocolError",
    "UnsupportedMagicError",
    "UnsupportedVersionError",
]
