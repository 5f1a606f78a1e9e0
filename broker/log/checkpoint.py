"""Kafka's offset checkpoint files, such as ``recovery-point-offset-checkpoint``.

Text, one item per line: the version (0), the number of entries, then
``<topic> <partition> <offset>`` for each. Written atomically (temp file,
fsync, rename, fsync of the directory), so a crash leaves the old file or
the new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tributary.broker.log.files import atomic_write

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
_VERSION = 0


def format_checkpoint(offsets: Mapping[tuple[str, int], int]) -> bytes:
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(data: bytes) -> dict[tuple[str, int], int]:
    """Raises ValueError for anything but a well-formed version-0 file."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != str(_VERSION):
        raise ValueError(f"checkpoint file has version line {lines[:1]!r}, expected {_VERSION}")
    count = int(lines[1])
    entries = lines[2:]
    if len(entries) != count:
        raise ValueError(f"checkpoint file declares {count} entries but holds {len(entries)}")
    offsets: dict[tuple[str, int], int] = {}
    for line in entries:
        fields = line.split()
        if len(fields) != 3:
            raise ValueError(f"malformed checkpoint line {line!r}")
        topic, partition, offset = fields
        offsets[topic, int(partition)] = int(offset)
    return offsets


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The file's entries; empty if it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    return parse_checkpoint(data)


def write_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    atomic_write(path, format_checkpoint(offsets))
