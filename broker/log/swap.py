"""Putting cleaned segments in place of the ones they replace, atomically across crashes.

The log cleaner writes a cleaned segment beside the log under temporary names,
``<base>.log.cleaned`` with its ``.index``, ``.timeindex`` and ``.gaps`` likewise, all fsynced.
Its base is the first replaced segment's, and it covers exactly the replaced segments' offsets:
where its last batches were removed, its gaps file ends with the offsets it emptied, so its end
is where the next segment begins. Then, Kafka's ``.cleaned -> .swap -> rename`` scheme, as
:func:`install` runs it:

1. the companion files ``.cleaned -> .swap``, then ``<base>.log.cleaned -> <base>.log.swap``:
   **the commit point**. Before it the clean never happened; after it, it must complete;
2. every file of every replaced segment is removed;
3. ``<base>.log.swap -> <base>.log``, then the companions ``.swap ->`` their final names.

:func:`recover` runs when a log opens, before its segments are read, and finishes whichever
step a crash interrupted, deciding by the files alone:

- a ``<base>.log.cleaned`` still there means the commit never happened: every ``.cleaned`` and
  ``.swap`` file of that base goes, and the replaced segments stand as they were;
- a ``<base>.log.swap`` means it did: the segments whose base lies in the swap's range (read from
  its batches and gaps) are removed, and the swap's files take their final names;
- a companion ``.swap`` file alone (the crash came in step 3, after the log's rename) takes its
  final name.

Every prefix of the sequence is thus recoverable, which is what a crash leaves of renames within
one directory (journalled file systems apply them in order); the directory is fsynced after the
sequence, off the event loop, by the log's next flush. Leftover ``.cleaned`` files of other
bases (a clean interrupted while writing) are removed too.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from tributary.broker.log.files import OPEN_FLAGS, unlink_quietly
from tributary.broker.log.gaps import GAPS_SUFFIX, decode_gaps, follow
from tributary.broker.log.segment import (
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    parse_segment_file_name,
    scan_batches,
    segment_file_name,
)

log = logging.getLogger(__name__)

CLEANED = ".cleaned"
SWAP = ".swap"
#: The companion files, renamed before the log file into ``.swap`` and after it out of it.
_COMPANIONS = SEGMENT_SUFFIXES[1:]


def staged_name(base: int, suffix: str, stage: str) -> str:
    """``<base><suffix><stage>``, e.g. ``00000000000000000000.log.cleaned``."""
    return segment_file_name(base, suffix) + stage


def _rename_if_present(directory: Path, name: str, target: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.rename(directory / name, directory / target)


def _remove_segment(directory: Path, base: int) -> None:
    for suffix in SEGMENT_SUFFIXES:
        unlink_quietly(directory / segment_file_name(base, suffix))


def install(
    directory: Path, base: int, replaced: Sequence[int], reached: Callable[[str], None] = lambda _phase: None
) -> None:
    """Steps 1-3 for the cleaned segment ``base`` (its ``.cleaned`` files written and fsynced)
    replacing the segments whose bases are ``replaced``. ``reached`` is told each step done
    (a test kills the process there)."""
    for suffix in _COMPANIONS:
        _rename_if_present(directory, staged_name(base, suffix, CLEANED), staged_name(base, suffix, SWAP))
    os.rename(directory / staged_name(base, LOG_SUFFIX, CLEANED), directory / staged_name(base, LOG_SUFFIX, SWAP))
    reached("swap-committed")
    for old in replaced:
        _remove_segment(directory, old)
    reached("old-deleted")
    os.rename(directory / staged_name(base, LOG_SUFFIX, SWAP), directory / segment_file_name(base, LOG_SUFFIX))
    reached("log-renamed")
    for suffix in _COMPANIONS:
        _rename_if_present(directory, staged_name(base, suffix, SWAP), segment_file_name(base, suffix))


def discard(directory: Path, base: int) -> None:
    """Removes the staged files of a clean that will not be installed."""
    for suffix in SEGMENT_SUFFIXES:
        for stage in (CLEANED, SWAP):
            unlink_quietly(directory / staged_name(base, suffix, stage))


def swap_end(directory: Path, base: int) -> int:
    """Where the swap segment ``base``'s offsets end: after its last batch and its gaps."""
    gaps_name = staged_name(base, GAPS_SUFFIX, SWAP)
    if not (directory / gaps_name).exists():
        gaps_name = segment_file_name(base, GAPS_SUFFIX)  # already renamed (step 3)
    try:
        gaps = decode_gaps((directory / gaps_name).read_bytes())
    except FileNotFoundError:
        gaps = {}
    fd = os.open(directory / staged_name(base, LOG_SUFFIX, SWAP), os.O_RDONLY | OPEN_FLAGS)
    try:
        end = base
        for _, header in scan_batches(fd, 0, os.fstat(fd).st_size, verify=False):
            end = header.next_offset
    finally:
        os.close(fd)
    return follow(gaps, end)


def _staged(directory: Path) -> tuple[set[int], set[int], list[tuple[int, str, str]]]:
    """(bases with a .log.cleaned, bases with a .log.swap, every staged file as (base, suffix, stage))."""
    cleaned: set[int] = set()
    swapped: set[int] = set()
    files: list[tuple[int, str, str]] = []
    for entry in os.scandir(directory):
        for stage in (CLEANED, SWAP):
            if not entry.name.endswith(stage):
                continue
            stem = entry.name[: -len(stage)]
            for suffix in SEGMENT_SUFFIXES:
                base = parse_segment_file_name(stem, suffix)
                if base is not None:
                    files.append((base, suffix, stage))
                    if suffix == LOG_SUFFIX:
                        (cleaned if stage == CLEANED else swapped).add(base)
    return cleaned, swapped, files


def recover(directory: Path) -> bool:
    """Finishes or undoes what a crash left of :func:`install` (see the module doc); returns
    whether there was anything to do."""
    cleaned, swapped, files = _staged(directory)
    if not files:
        return False
    for base, suffix, stage in files:
        if stage == CLEANED or (base in cleaned and base not in swapped):
            # Not committed: the clean never happened.
            unlink_quietly(directory / staged_name(base, suffix, stage))
    for base in sorted(swapped):
        end = swap_end(directory, base)
        log.warning("%s: completing the swap of cleaned segment %d (offsets up to %d)", directory, base, end)
        for entry in os.scandir(directory):
            old = parse_segment_file_name(entry.name, LOG_SUFFIX)
            if old is not None and base <= old < end:
                _remove_segment(directory, old)
        os.rename(directory / staged_name(base, LOG_SUFFIX, SWAP), directory / segment_file_name(base, LOG_SUFFIX))
    _, _, left = _staged(directory)
    for base, suffix, stage in left:
        if stage == SWAP:  # a companion whose log was renamed already (step 3)
            os.rename(directory / staged_name(base, suffix, SWAP), directory / segment_file_name(base, suffix))
    return True
