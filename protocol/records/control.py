"""Control records: the transaction markers a coordinator has written into a partition.

A control batch (attributes bit 5, and bit 4: it belongs to a transaction) holds one
record. Its key is ``version int16, type int16``: type 0 marks the producer's open
transaction aborted, 1 committed. Its value (an end-transaction marker) is
``version int16, coordinatorEpoch int32``: the epoch of the transaction coordinator that
wrote it, so a partition can refuse a marker from a coordinator that was deposed.
Control batches are never compressed and carry no sequence number.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records.builder import BatchBuilder
from tributary.protocol.records.codec import iter_records

_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class Marker(NamedTuple):
    """What an end-transaction marker says."""

    control_type: ControlType
    coordinator_epoch: int


def control_type(buf: BytesLike, pos: int = 0) -> ControlType | None:
    """The marker the control batch at ``pos`` holds; None if its first record's key
    is not a marker this broker version knows."""
    for record in iter_records(buf, pos):
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            kind: int = _CONTROL_KEY.unpack_from(record.key)[1]
            return ControlType(kind) if kind in ControlType._value2member_map_ else None
        break
    return None


def read_marker(buf: BytesLike, pos: int = 0) -> Marker | None:
    """The end-transaction marker of the control batch at ``pos``: its type and the
    coordinator epoch of its value (-1 when the value is missing or short); None when the
    batch holds no marker this version knows. Raises CorruptRecordError for a batch that
    does not decode."""
    for record in iter_records(buf, pos):
        if record.key is None or len(record.key) < _CONTROL_KEY.size:
            return None
        kind: int = _CONTROL_KEY.unpack_from(record.key)[1]
        if kind not in ControlType._value2member_map_:
            return None
        epoch = -1
        if record.value is not None and len(record.value) >= _MARKER_VALUE.size:
            epoch = _MARKER_VALUE.unpack_from(record.value)[1]
        return Marker(ControlType(kind), epoch)
    raise CorruptRecordError("control batch holds no record")


def build_marker_batch(
    marker: ControlType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding the end-transaction marker of ``producer_id``'s
    transaction, as a transaction coordinator has a partition leader append it."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        _CONTROL_KEY.pack(CONTROL_KEY_VERSION, marker),
        _MARKER_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch),
        timestamp=timestamp_ms,
    )
    return builder.build()
