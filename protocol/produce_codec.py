"""Produce on the broker's hot path: the request decoded and the response encoded by hand.

A broker spends more on the generic codec (:mod:`.codec`: a closure per field, a dict per
struct) than on anything else a small Produce request asks of it, and clients send nothing
more often. These two functions cover the versions clients send (v3 to v11; v9+ flexible)
straight off the wire grammar::

    ProduceRequest  => transactional_id acks:int16 timeout_ms:int32 [topic_data] <tags>
      topic_data    => name [partition_data] <tags>
      partition_data=> index:int32 records <tags>

    ProduceResponse => [responses] throttle_time_ms:int32 <tags: node_endpoints (v10+)>
      responses     => name [partition_responses] <tags>
      partition     => index:int32 error_code:int16 base_offset:int64 log_append_time_ms:int64
                       log_start_offset:int64 (v5+) [record_errors] (v8+) error_message (v8+)
                       <tags: current_leader (v10+)>
      record_errors => batch_index:int32 batch_index_error_message <tags>

Strings, bytes and arrays carry int16/int32 lengths up to v8 and compact (varint) lengths
from v9, where each struct also ends in a tagged-field section.

They are shortcuts, not a second codec: whatever they do not take in their stride (another
version, a tagged field, a length that does not add up, text that is not UTF-8, a value out
of range) goes to the generic codec, which decodes it or raises its own error. So the answer
is the generic codec's, field for field and byte for byte, for every input; a property test
holds them to it (tests/protocol/test_produce_codec.py).
"""

from __future__ import annotations

import struct

from tributary.protocol import codec
from tributary.protocol.messages import ProduceRequest, ProduceResponse
from tributary.protocol.primitives import Reader, encode_unsigned_varint

#: The versions the shortcuts take: what clients send (v0-v2 carry old message sets).
FIRST_VERSION = 3
LAST_VERSION = 11
_FLEXIBLE = 9
_RECORD_ERRORS = 8
_LOG_START_OFFSET = 5
_LEADER_HINTS = 10

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PAIR = struct.Struct(">ii")  # a partition's index and its records' length
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log_start_offset
_NO_TAGS = b"\x00"
_NULL_STRING = b"\xff\xff"
_NULL_COMPACT = b"\x00"
#: The compact length (``n + 1``, one byte) of each small n.
_SMALL = 0x7F
_COMPACT_LENGTHS = tuple(bytes((n + 1,)) for n in range(_SMALL))


class _Fallback(Exception):
    """The input is not one the shortcut takes: the generic codec decides."""


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of up to five bytes (anything longer is left to the generic codec)."""
    value = shift = 0
    for i in range(5):
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + i + 1
        shift += 7
    raise _Fallback


def _text(buf: bytes, start: int, size: int) -> str:
    end = start + size
    if end > len(buf):
        raise _Fallback
    return buf[start:end].decode()  # UnicodeDecodeError: the generic codec names it


# --- the request ---------------------------------------------------------------------------


def decode_request(frame: bytes, pos: int, version: int) -> ProduceRequest:
    """The ProduceRequest at ``pos`` of ``frame`` (after its header), as ``codec.read`` decodes it."""
    if FIRST_VERSION <= version <= LAST_VERSION and isinstance(frame, bytes):
        try:
            return _decode_flexible(frame, pos) if version >= _FLEXIBLE else _decode_classic(frame, pos)
        except (_Fallback, IndexError, struct.error, UnicodeDecodeError):
            pass
    return codec.read(ProduceRequest, Reader(frame, pos), version)


def _decode_classic(buf: bytes, pos: int) -> ProduceRequest:
    (size,) = _I16.unpack_from(buf, pos)
    pos += 2
    if size >= 0:
        transactional_id: str | None = _text(buf, pos, size)
        pos += size
    elif size == -1:
        transactional_id = None
    else:
        raise _Fallback
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    (topic_count,) = _I32.unpack_from(buf, pos + 6)
    pos += 10
    if topic_count < 0:
        raise _Fallback
    topics = []
    for _ in range(topic_count):
        (size,) = _I16.unpack_from(buf, pos)
        if size < 0:
            raise _Fallback
        name = _text(buf, pos + 2, size)
        (partition_count,) = _I32.unpack_from(buf, pos + 2 + size)
        pos += 6 + size
        if partition_count < 0:
            raise _Fallback
        partitions = []
        for _ in range(partition_count):
            index, size = _PAIR.unpack_from(buf, pos)
            pos += 8
            if size >= 0:
                end = pos + size
                if end > len(buf):
                    raise _Fallback
                records: bytes | None = buf[pos:end]
                pos = end
            elif size == -1:
                records = None
            else:
                raise _Fallback
            partitions.append(ProduceRequest.PartitionProduceData(index, records))
        topics.append(ProduceRequest.TopicProduceData(name, partitions))
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


def _decode_flexible(buf: bytes, pos: int) -> ProduceRequest:
    # One-byte varints (every length below 127) are read inline: a call each cost as much.
    size = buf[pos]
    size, pos = (size, pos + 1) if size < 0x80 else _uvarint(buf, pos)
    if size:
        transactional_id: str | None = _text(buf, pos, size - 1)
        pos += size - 1
    else:
        transactional_id = None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topic_count = buf[pos]
    topic_count, pos = (topic_count, pos + 1) if topic_count < 0x80 else _uvarint(buf, pos)
    if not topic_count:
        raise _Fallback  # a null array: the generic codec refuses it
    topics = []
    for _ in range(topic_count - 1):
        size = buf[pos]
        size, pos = (size, pos + 1) if size < 0x80 else _uvarint(buf, pos)
        if not size:
            raise _Fallback
        name = _text(buf, pos, size - 1)
        partitions, pos = _flexible_partitions(buf, pos + size - 1)
        if buf[pos]:
            raise _Fallback  # tagged fields: the generic codec skips them
        pos += 1
        topics.append(ProduceRequest.TopicProduceData(name, partitions))
    if buf[pos]:
        raise _Fallback
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


def _flexible_partitions(buf: bytes, pos: int) -> tuple[list[ProduceRequest.PartitionProduceData], int]:
    count = buf[pos]
    count, pos = (count, pos + 1) if count < 0x80 else _uvarint(buf, pos)
    if not count:
        raise _Fallback
    partitions = []
    for _ in range(count - 1):
        (index,) = _I32.unpack_from(buf, pos)
        size, pos = _uvarint(buf, pos + 4)
        if size:
            end = pos + size - 1
            if end > len(buf):
                raise _Fallback
            records: bytes | None = buf[pos:end]
            pos = end
        else:
            records = None
        if buf[pos]:
            raise _Fallback
        pos += 1
        partitions.append(ProduceRequest.PartitionProduceData(index, records))
    return partitions, pos


# --- the response --------------------------------------------------------------------------


def encode_response(response: ProduceResponse, version: int, correlation_id: int) -> bytes | None:
    """The whole response frame (length prefix, header, body), the bytes the generic codec
    writes; None when the shortcut does not take it (the caller encodes it generically)."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    flexible = version >= _FLEXIBLE
    if version >= _LEADER_HINTS and response.node_endpoints:
        return None
    try:
        out = [_I32.pack(correlation_id)]
        if flexible:
            out.append(_NO_TAGS)  # response header v1
        _array_length(out, len(response.responses), flexible)
        for topic in response.responses:
            _string(out, topic.name, flexible)
            _array_length(out, len(topic.partition_responses), flexible)
            for partition in topic.partition_responses:
                _partition(out, partition, version, flexible)
            if flexible:
                out.append(_NO_TAGS)
        out.append(_I32.pack(response.throttle_time_ms))
        if flexible:
            out.append(_NO_TAGS)
    except (_Fallback, struct.error, TypeError, AttributeError, UnicodeEncodeError):
        return None
    body = b"".join(out)
    return _I32.pack(len(body)) + body


#: What follows a partition's offsets when it has no record errors, no message and (v10+) no
#: leader to name, by version: the record errors' empty array, the null message, the tags.
_PLAIN_TAIL = {
    version: (b"\x01\x00\x00" if version >= _FLEXIBLE else b"\x00\x00\x00\x00\xff\xff")
    if version >= _RECORD_ERRORS
    else b""
    for version in range(FIRST_VERSION, LAST_VERSION + 1)
}


def _partition(out: list[bytes], p: ProduceResponse.PartitionProduceResponse, version: int, flexible: bool) -> None:
    if version >= _LOG_START_OFFSET and not p.record_errors and p.error_message is None:
        leader = p.current_leader
        if version < _LEADER_HINTS or (leader.leader_id == -1 and leader.leader_epoch == -1):
            # The answer to almost every request, in one piece.
            out.append(
                _PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
                + _PLAIN_TAIL[version]
            )
            return
    if version >= _LOG_START_OFFSET:
        out.append(_PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset))
    else:
        out.append(_PARTITION_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
    if version >= _RECORD_ERRORS:
        _array_length(out, len(p.record_errors), flexible)
        for e in p.record_errors:
            out.append(_I32.pack(e.batch_index))
            _nullable_string(out, e.batch_index_error_message, flexible)
            if flexible:
                out.append(_NO_TAGS)
        _nullable_string(out, p.error_message, flexible)
    if flexible:
        leader = p.current_leader
        if version >= _LEADER_HINTS and (leader.leader_id != -1 or leader.leader_epoch != -1):
            raise _Fallback  # a tagged field: the generic codec writes those
        out.append(_NO_TAGS)


def _array_length(out: list[bytes], n: int, flexible: bool) -> None:
    if not flexible:
        out.append(_I32.pack(n))
    else:
        out.append(_COMPACT_LENGTHS[n] if n < _SMALL else encode_unsigned_varint(n + 1))


def _string(out: list[bytes], value: str, flexible: bool) -> None:
    data = value.encode()
    if flexible:
        n = len(data)
        out.append(_COMPACT_LENGTHS[n] if n < _SMALL else encode_unsigned_varint(n + 1))
    else:
        if len(data) > 0x7FFF:
            raise _Fallback
        out.append(_I16.pack(len(data)))
    out.append(data)


def _nullable_string(out: list[bytes], value: str | None, flexible: bool) -> None:
    if value is None:
        out.append(_NULL_COMPACT if flexible else _NULL_STRING)
    else:
        _string(out, value, flexible)
