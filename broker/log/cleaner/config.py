"""The log cleaner's broker settings, Kafka's ``log.cleaner.*`` under Python names.

The per-topic settings (``cleanup.policy``, ``delete.retention.ms``, ``min.cleanable.dirty.ratio``,
``min.compaction.lag.ms``, ``max.compaction.lag.ms``) live in :class:`~tributary.broker.log.config.
LogConfig` with the other topic configs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1024 * 1024
#: ``log.cleaner.isolation``: where a clean's CPU work runs (see :mod:`.worker`).
PROCESS = "process"
THREAD = "thread"


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    #: ``log.cleaner.enable``: compacted topics are cleaned at all.
    enable: bool = True
    #: ``log.cleaner.threads``: logs cleaned at once, each in a thread of its own.
    threads: int = 1
    #: ``log.cleaner.io.max.bytes.per.second``: bytes read plus written by all cleaner
    #: threads together (Kafka's default, Double.MAX_VALUE, is no limit: ``inf``).
    io_max_bytes_per_second: float = math.inf
    #: ``log.cleaner.dedupe.buffer.size``: the memory all threads' key maps may take together;
    #: a clean covers as much of the dirty part as its share holds.
    dedupe_buffer_size: int = 128 * MIB
    #: ``log.cleaner.io.buffer.load.factor``: how full a key map is filled.
    io_buffer_load_factor: float = 0.9
    #: ``log.cleaner.backoff.ms``: how long a cleaner thread sleeps when no log needs cleaning.
    backoff_ms: int = 15_000
    #: ``log.cleaner.isolation`` (Tributary's own): each clean runs in a worker process (the
    #: default: its CPU work never holds the broker's interpreter lock) or in a thread of the
    #: broker (for comparison: bench/bench_cleaner.py measures both).
    isolation: str = PROCESS

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"log.cleaner.threads must be at least 1, got {self.threads}")
        if not self.io_max_bytes_per_second > 0:
            raise ValueError(f"log.cleaner.io.max.bytes.per.second must be above 0, got {self.io_max_bytes_per_second}")
        if self.dedupe_buffer_size < 1 * MIB:
            raise ValueError(f"log.cleaner.dedupe.buffer.size must be at least 1 MiB, got {self.dedupe_buffer_size}")
        if not 0 < self.io_buffer_load_factor <= 1:
            raise ValueError(f"log.cleaner.io.buffer.load.factor must be in (0, 1], got {self.io_buffer_load_factor}")
        if self.isolation not in (PROCESS, THREAD):
            raise ValueError(f"log.cleaner.isolation must be {PROCESS} or {THREAD}, not {self.isolation!r}")
        if self.backoff_ms < 0:
            raise ValueError(f"log.cleaner.backoff.ms must be at least 0, got {self.backoff_ms}")

    @property
    def buffer_per_thread(self) -> int:
        return self.dedupe_buffer_size // self.threads
