"""Request and response envelopes: header version selection, encode and decode.

A request header is v1 (int16 key, int16 version, int32 correlation id,
nullable client id) or, for flexible request versions, v2 (v1 plus tagged
fields). A response header is v0 (the correlation id) or v1 (plus tagged
fields) for flexible versions, except ApiVersions, whose response header is
always v0: a client that sent a version the broker rejects must still be able
to read the answer.

A server reads the header first (:func:`decode_request_header`), decides
whether it supports the API and version, and only then decodes the body
(:func:`decode_request_body`), so an unknown API gets an error response
rather than a closed connection.
"""

from __future__ import annotations

import struct
from collections.abc import Sized
from typing import Any, NamedTuple

from tributary.protocol import codec, produce_codec
from tributary.protocol.errors import ProtocolError, UnsupportedVersionError
from tributary.protocol.messages import API_MESSAGES, ApiKey, ProduceResponse, RequestHeader, ResponseHeader
from tributary.protocol.primitives import Reader, Writer
from tributary.protocol.schema import Declared

_LENGTH = struct.Struct(">i")
#: A request header's api key, api version, correlation id and client id length.
_HEADER_PREFIX = struct.Struct(">hhih")


def is_flexible(api_key: int, version: int) -> bool:
    flexible = _flexible.get((api_key, version))
    if flexible is None:
        messages = API_MESSAGES.get(api_key)  # type: ignore[call-overload]
        flexible = messages is not None and version in messages[0].SPEC.flexible
        if messages is not None:  # keyed by what the tables know: a hostile key adds nothing
            _flexible[api_key, version] = flexible
    return flexible


_flexible: dict[tuple[int, int], bool] = {}


def request_header_version(api_key: int, version: int) -> int:
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


def _framed_writer(parts: list[tuple[Declared, int]]) -> Writer:
    w = Writer()
    w.int32(0)  # length, patched below
    for obj, version in parts:
        codec.write(w, obj, version)
    _LENGTH.pack_into(w.buf, 0, w.size - 4)
    return w


def _framed(parts: list[tuple[Declared, int]]) -> bytes:
    w = _framed_writer(parts)
    if w.splices:
        raise ValueError("a message with spliced records must be sent with encode_response_parts")
    return bytes(w.buf)


def encode_request(body: Declared, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame, length prefix included."""
    api_key = type(body).SPEC.api_key
    assert api_key is not None, f"{type(body).__name__} is not a request"
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    return _framed([(header, request_header_version(api_key, version)), (body, version)])


def encode_response(body: Declared, version: int, correlation_id: int) -> bytes:
    """A whole response frame, length prefix included."""
    api_key = type(body).SPEC.api_key
    assert api_key is not None, f"{type(body).__name__} is not a response"
    header = ResponseHeader(correlation_id=correlation_id)
    return _framed([(header, response_header_version(api_key, version)), (body, version)])


def encode_response_parts(body: Declared, version: int, correlation_id: int) -> list[bytes | Sized]:
    """A whole response frame as byte strings and spliced records objects, in order
    (see ``Writer.splice``): the broker sends fetched records without copying them."""
    if type(body) is ProduceResponse:  # the broker's hot path (protocol/produce_codec.py)
        frame = produce_codec.encode_response(body, version, correlation_id)
        if frame is not None:
            return [frame]
    api_key = type(body).SPEC.api_key
    assert api_key is not None, f"{type(body).__name__} is not a response"
    header = ResponseHeader(correlation_id=correlation_id)
    return _framed_writer([(header, response_header_version(api_key, version)), (body, version)]).parts()


class RequestEnvelope(NamedTuple):
    """A request's header and the offset of its body in the frame. (A named tuple: made for
    every request, and a third of what a frozen dataclass costs to make.)"""

    header: RequestHeader
    body_offset: int

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def decode_request_header(frame: bytes | bytearray | memoryview) -> RequestEnvelope:
    """Read the header of a request frame (its payload, without the length prefix).

    An API key or version we do not declare still yields a header (read as v1),
    so the caller can answer with UNSUPPORTED_VERSION."""
    envelope = _common_header(frame)
    if envelope is not None:
        return envelope
    r = Reader(frame)
    api_key = r.int16()
    version = r.int16()
    r.pos = 0
    header = codec.read(RequestHeader, r, request_header_version(api_key, version))
    return RequestEnvelope(header, r.pos)


def _common_header(frame: bytes | bytearray | memoryview) -> RequestEnvelope | None:
    """Every request starts here: the common shape (a client id or none, no tagged fields)
    is read straight off the bytes. None for anything else, which the generic codec reads
    (or refuses, with its own error)."""
    if not isinstance(frame, bytes) or len(frame) < _HEADER_PREFIX.size:
        return None
    api_key, version, correlation_id, size = _HEADER_PREFIX.unpack_from(frame)
    end = _HEADER_PREFIX.size + size
    client_id: str | None = None
    if size == -1:
        end = _HEADER_PREFIX.size
    elif size >= 0 and end <= len(frame):
        try:
            client_id = frame[_HEADER_PREFIX.size : end].decode()
        except UnicodeDecodeError:
            return None
    else:
        return None
    if is_flexible(api_key, version):
        if end >= len(frame) or frame[end] != 0:  # tagged fields (or none at all)
            return None
        end += 1
    return RequestEnvelope(RequestHeader(api_key, version, correlation_id, client_id), end)


def decode_request_body(envelope: RequestEnvelope, frame: bytes | bytearray | memoryview) -> Any:
    """Decode the body of a request whose header :func:`decode_request_header` read."""
    if envelope.api_key == ApiKey.PRODUCE and isinstance(frame, bytes):  # the broker's hot path
        return produce_codec.decode_request(frame, envelope.body_offset, envelope.api_version)
    messages = API_MESSAGES.get(envelope.api_key)  # type: ignore[call-overload]
    if messages is None:
        raise UnsupportedVersionError(f"unknown API key {envelope.api_key}")
    return codec.read(messages[0], Reader(frame, envelope.body_offset), envelope.api_version)


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id a response frame starts with."""
    if len(frame) < 4:
        raise ProtocolError(f"response frame of {len(frame)} bytes has no correlation id")
    (correlation_id,) = _LENGTH.unpack_from(frame, 0)
    return int(correlation_id)


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(correlation id, body) of a response frame's payload."""
    messages = API_MESSAGES.get(api_key)  # type: ignore[call-overload]
    if messages is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    r = Reader(frame)
    header = codec.read(ResponseHeader, r, response_header_version(api_key, version))
    return header.correlation_id, codec.read(messages[1], r, version)
