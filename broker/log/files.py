"""Small durable-file primitives shared by the log's modules."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tributary.protocol.crc32c import BytesLike

# Every file the log opens is closed explicitly; no child process needs them.
OPEN_FLAGS = os.O_CLOEXEC


def write_all(fd: int, data: BytesLike) -> None:
    """os.write until every byte is written: a regular file may take a short
    write (a signal, a nearly full disk), and a half-written batch is corruption."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"write to fd {fd} made no progress")
        view = view[written:]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Makes a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` so that a crash leaves the old or the new
    content, never a mix: temp file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def unlink_quietly(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
