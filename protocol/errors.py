"""The exceptions the protocol package raises.

Every decoder in this package turns malformed input into :class:`ProtocolError`
(or a subclass), never ``IndexError``/``struct.error``: a server can catch one
type and close that connection only.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Bytes that do not follow the Kafka wire protocol."""


class FrameTooLargeError(ProtocolError):
    """A frame's length prefix exceeds the configured maximum."""


class UnsupportedVersionError(ProtocolError):
    """A message version this codec does not declare."""


class CorruptRecordError(ProtocolError):
    """A record batch whose CRC, length or internal structure is wrong.

    Brokers answer it with CORRUPT_MESSAGE."""


class UnsupportedMagicError(ProtocolError):
    """A message set in format v0/v1 (magic 0 or 1): only v2 batches are accepted.

    Brokers answer it with INVALID_RECORD."""

    def __init__(self, magic: int) -> None:
        super().__init__(f"record batch magic {magic} is not supported; only magic 2 (message format v2) is")
        self.magic = magic


class CodecUnavailableError(RuntimeError):
    """A compression codec whose optional package is not installed."""

    def __init__(self, codec: str, package: str) -> None:
        super().__init__(
            f"{codec} compression needs the Python package '{package}', which is not installed (pip install {package})"
        )
        self.codec = codec
        self.package = package
