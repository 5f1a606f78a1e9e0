"""Control records: the transaction markers a coordinator writes into a partition.

A control batch (attributes bit 5) holds one record whose key is ``version int16,
type int16``: type 0 marks the producer's open transaction aborted, 1 committed.
Control batches are never compressed.
"""

from __future__ import annotations

import enum
import struct

from tributary.protocol.crc32c import BytesLike
from tributary.protocol.records.codec import iter_records

_CONTROL_KEY = struct.Struct(">hh")  # version, type


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def control_type(buf: BytesLike, pos: int = 0) -> ControlType | None:
    """The marker the control batch at ``pos`` holds; None if its first record's key
    is not a marker this broker version knows."""
    for record in iter_records(buf, pos):
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            kind: int = _CONTROL_KEY.unpack_from(record.key)[1]
            return ControlType(kind) if kind in ControlType._value2member_map_ else None
        break
    return None
