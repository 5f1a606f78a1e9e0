"""The leader-epoch cache of a partition: where each leader epoch starts in the log (KIP-101).

An ordered list of (epoch, start offset), both strictly increasing: the first offset each leader
wrote. A follower that rejoins asks its leader where the follower's latest epoch ends in the
leader's log (OffsetForLeaderEpoch) and cuts its own log there; so the cache must survive restarts
(file ``leader-epoch-checkpoint``, Kafka's text format: version 0, the count, then one
``<epoch> <start offset>`` line per entry) and follow every truncation of the log at either end.

The rules are those of Kafka's LeaderEpochFileCache (assign, endOffsetFor, truncateFromEnd,
truncateFromStart). Writing the file is the owner's call (`dirty`), so a burst of changes costs
one atomic write.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from tributary.broker.log.files import atomic_write

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


class LeaderEpochCache:
    def __init__(self, path: Path | None, entries: list[tuple[int, int]] | None = None) -> None:
        """`path`: the checkpoint file (None: kept in memory only)."""
        self._path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)
        self.dirty = False

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache in `path`, or None when the file is missing or malformed (rebuild it then)."""
        try:
            lines = path.read_text().split("\n")
            if lines[0].strip() != str(_VERSION):
                return None
            count = int(lines[1])
            entries = [tuple(int(field) for field in line.split()) for line in lines[2 : 2 + count]]
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            return None
        if len(entries) != count or any(len(e) != 2 for e in entries):
            return None
        cache = cls(path, [(e[0], e[1]) for e in entries])
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that `epoch` starts at `start_offset`. An epoch not newer than the latest changes
        nothing (every batch of an epoch calls this; only its first counts), except that newer
        entries starting at or after `start_offset` are empty and go. Entries at or after
        `start_offset` belong to a log that was since cut, and go (Kafka does the same)."""
        if epoch < 0:
            return
        # A newer epoch that starts at or after this batch never wrote anything here (a leader
        # took over and stepped down before appending): as a follower now receives an older
        # epoch's data at that offset, the empty entry goes, or it would claim that data.
        while self._epochs and epoch < self._epochs[-1] and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
            self.dirty = True
        if self._epochs and epoch <= self._epochs[-1]:
            return
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.dirty = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch for `requested_epoch` (KIP-279).

        As Kafka's endOffsetFor: the latest epoch ends at the log end; an older one is answered
        with the largest epoch not above it and where the next epoch starts; one older than every
        entry with itself and where the first entry starts (nothing of it is here); one newer
        than the latest, or an empty cache, with (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        if not self._epochs or requested_epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = self._epochs[-1]
        if requested_epoch == latest:
            return latest, log_end_offset
        if requested_epoch > latest:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        i = bisect_right(self._epochs, requested_epoch)  # first entry with a larger epoch
        if i == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[i - 1], self._starts[i]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at `end_offset`: epochs starting there or later are gone."""
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch holding it starts there, older ones go."""
        i = bisect_right(self._starts, start_offset)  # entries starting at or before it
        if i == 0:
            return
        if i > 1 or self._starts[0] < start_offset:
            del self._epochs[: i - 1]
            del self._starts[: i - 1]
            self._starts[0] = max(self._starts[0], start_offset)
            self.dirty = True

    def write(self) -> None:
        """Write the checkpoint file if anything changed since the last write."""
        if not self.dirty or self._path is None:
            return
        lines = [str(_VERSION), str(len(self._epochs))]
        lines += [f"{epoch} {start}" for epoch, start in zip(self._epochs, self._starts, strict=True)]
        atomic_write(self._path, ("\n".join(lines) + "\n").encode())
        self.dirty = False
