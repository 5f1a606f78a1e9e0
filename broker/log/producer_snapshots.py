"""Producer-state snapshots: ``<offset, 20 digits>.snapshot`` files, as Kafka keeps them.

A snapshot holds the producer state (sequences, epochs, open transactions) as of the log end
``offset``. The log takes one at every segment roll (at the new segment's base offset) and at
a clean close (at the log end). Opening the log loads the newest snapshot at or below where
its recovery must start and replays the batch headers after it, so neither idempotence nor an
open transaction is forgotten by a restart, however far back the transaction began.

Snapshots taken at a roll are renamed into place without an fsync (the roll must not wait on
the disk); the next flush of the log syncs them. A crash may leave one torn: its checksum
fails, it is deleted, and an older one (or the log start) serves instead. Snapshots past the
log end (recovery cut the log before them) and before the log start (retention deleted their
segments) are deleted.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tributary.broker.log.files import OPEN_FLAGS, atomic_write, unlink_quietly, write_all
from tributary.broker.log.producer_state import ProducerStateManager
from tributary.broker.log.segment import parse_segment_file_name, segment_file_name

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
#: What a clean close wrote before snapshots were named by offset; removed when found.
LEGACY_SNAPSHOT_FILE = "producer-state.snapshot"


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / segment_file_name(offset, SNAPSHOT_SUFFIX)


def list_snapshots(directory: Path) -> list[int]:
    """The offsets of the snapshots in ``directory``, ascending."""
    offsets = []
    with os.scandir(directory) as entries:
        for entry in entries:
            offset = parse_segment_file_name(entry.name, SNAPSHOT_SUFFIX)
            if offset is not None:
                offsets.append(offset)
    return sorted(offsets)


def write_snapshot(directory: Path, state: ProducerStateManager, offset: int, *, durable: bool) -> Path:
    """Writes the snapshot of ``state`` as of ``offset``. ``durable``: fsynced with its directory
    before returning; otherwise renamed into place for :func:`sync_snapshot` to make durable."""
    path = snapshot_path(directory, offset)
    data = state.to_bytes(offset)
    if durable:
        atomic_write(path, data)
        return path
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def sync_snapshot(path: Path) -> None:
    """fsyncs a snapshot :func:`write_snapshot` left in the page cache (the caller syncs the
    directory); one deleted meanwhile is no longer needed."""
    try:
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_latest(directory: Path, at_most: int, now_ms: int) -> tuple[int, ProducerStateManager] | None:
    """The newest readable snapshot at or below ``at_most``: (its offset, the state). Damaged
    ones met on the way are deleted."""
    for offset in reversed(list_snapshots(directory)):
        if offset > at_most:
            continue
        path = snapshot_path(directory, offset)
        try:
            found, state = ProducerStateManager.from_bytes(path.read_bytes(), now_ms)
        except (OSError, ValueError) as exc:
            log.warning("%s: deleting an unreadable producer state snapshot: %s", path, exc)
            unlink_quietly(path)
            continue
        if found != offset:
            log.warning("%s: snapshot says offset %d; deleting it", path, found)
            unlink_quietly(path)
            continue
        return offset, state
    return None


def delete_snapshots(directory: Path, *, below: int | None = None, above: int | None = None) -> int:
    """Deletes the snapshots at offsets below ``below`` and above ``above``; returns how many."""
    deleted = 0
    for offset in list_snapshots(directory):
        if (below is not None and offset < below) or (above is not None and offset > above):
            unlink_quietly(snapshot_path(directory, offset))
            deleted += 1
    return deleted
