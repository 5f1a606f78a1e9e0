# Types of the compiled loops in _speedups.c (see protocol/records/compiled.py).
from typing import Any

from tributary.protocol.crc32c import BytesLike

def walk(data: BytesLike, pos: int, end: int, index: int, count: int, latest: int, /) -> tuple[int, int, int]: ...
def decode_into(
    out: list[Any],
    data: BytesLike,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
    record_type: type,
    /,
) -> None: ...
def append_record(
    records: bytearray, key: BytesLike | None, value: BytesLike | None, timestamp_delta: int, offset_delta: int, /
) -> None: ...
def carry_crc(buf: bytearray | memoryview, pos: int, start: BytesLike, /) -> int: ...
def configure(error: type[Exception], record_class: type, /) -> None: ...
