"""The broker's log cleaner: ``log.cleaner.threads`` tasks that each pick the filthiest
compacted log, have it cleaned off the event loop, and put the result in place.

A clean's CPU work (decoding, filtering, recompressing records) runs in a worker process
(:mod:`.worker`) or, with ``log.cleaner.isolation = "thread"``, in a thread; the event loop only
plans the clean (numbers it already holds) and installs it (a few renames per cleaned segment:
:meth:`PartitionLog.replace_segments`). The first dirty offset of each log is kept in the data
directory's ``cleaner-offset-checkpoint`` (Kafka's file and format), written after each clean that
was installed whole; a log truncated below it (a follower) is dirty again from there.

A log whose clean fails (a corrupt batch, a full disk) is left alone for a while
(:data:`FAILURE_BACKOFF`, in backoffs) and counted as uncleanable meanwhile; the others go on.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass

import trio

from tributary.broker.log.checkpoint import read_checkpoint, write_checkpoint
from tributary.broker.log.cleaner import hooks
from tributary.broker.log.cleaner.clean import CleanRequest, CleanResult, CleanStopped, clean
from tributary.broker.log.cleaner.config import THREAD, CleanerConfig
from tributary.broker.log.cleaner.cycle import Planned, install, plan_clean
from tributary.broker.log.cleaner.plan import priority
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import LogManager, TopicPartition
from tributary.broker.log.swap import discard

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
#: A log whose clean failed waits this many backoffs before it is tried again.
FAILURE_BACKOFF = 20
WORKER_MODULE = "tributary.broker.log.cleaner.worker"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CleanFailedError(Exception):
    pass


@dataclass(slots=True)
class CleanerStats:
    cleans: int = 0
    failures: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    cpu_seconds: float = 0.0
    last_clean_seconds: float = 0.0
    max_clean_seconds: float = 0.0
    #: The dirty ratio of the filthiest compacted log at the last look, in percent.
    max_dirty_percent: float = 0.0
    last_run_ms: int = 0


class LogCleaner:
    def __init__(self, logs: LogManager, config: CleanerConfig) -> None:
        self._logs = logs
        self.config = config
        self._checkpoint_path = logs.data_dir / CLEANER_CHECKPOINT
        try:
            self._first_dirty: dict[tuple[str, int], int] = read_checkpoint(self._checkpoint_path)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning(
                "%s is unreadable (%s): every compacted log is dirty from its start", self._checkpoint_path, exc
            )
            self._first_dirty = {}
        self._busy: set[TopicPartition] = set()
        #: Logs whose last clean failed, and until when (trio time) they are left alone.
        self.failed: dict[TopicPartition, float] = {}
        #: When a tombstone or marker a clean kept may go, per log.
        self._horizons: dict[TopicPartition, int] = {}
        #: Logs whose last clean could not move on (an open transaction at its start): left
        #: alone for a while rather than cleaned again at every look.
        self._resting: dict[TopicPartition, float] = {}
        self.stats = CleanerStats()
        #: Set when a clean was installed (tests and benchmarks wait on it).
        self.cleaned = trio.Event()

    def first_dirty_offset(self, tp: TopicPartition) -> int | None:
        return self._first_dirty.get((tp.topic, tp.partition))

    # --- choosing --------------------------------------------------------------------

    def _grab(self, now_ms: int) -> tuple[TopicPartition, PartitionLog, Planned] | None:
        best: tuple[tuple[bool, float], TopicPartition, PartitionLog, Planned] | None = None
        worst_ratio = 0.0
        now = trio.current_time()
        for tp, plog in self._logs.all_logs().items():
            if plog.closed or not plog.config.compacts:
                continue
            key = (tp.topic, tp.partition)
            if plog.lowest_truncation is not None:
                # What was cleaned from there on is gone: dirty again.
                if key in self._first_dirty:
                    self._first_dirty[key] = min(self._first_dirty[key], plog.lowest_truncation)
                plog.lowest_truncation = None
            if tp in self._busy or self.failed.get(tp, -1.0) > now or self._resting.get(tp, -1.0) > now:
                continue
            horizon = self._horizons.get(tp)
            planned = plan_clean(
                plog,
                self._first_dirty.get(key),
                now_ms,
                self.config,
                horizon_passed=horizon is not None and horizon <= now_ms,
            )
            if planned is None:
                continue
            worst_ratio = max(worst_ratio, planned.dirt.ratio)
            rank = priority(planned.dirt)
            if best is None or rank > best[0]:
                best = (rank, tp, plog, planned)
        self.stats.max_dirty_percent = 100 * worst_ratio
        return None if best is None else best[1:]

    # --- running -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The cleaner threads, until cancelled (``log.cleaner.enable`` false: none)."""
        task_status.started()
        if not self.config.enable:
            return
        async with trio.open_nursery() as nursery:
            for _ in range(self.config.threads):
                nursery.start_soon(self._loop)

    async def _loop(self) -> None:
        backoff = self.config.backoff_ms / 1000
        while True:
            job = self._grab(_now_ms())
            if job is None:
                await trio.sleep(backoff)
                continue
            tp, plog, planned = job
            self._busy.add(tp)
            try:
                await self.clean_planned(tp, plog, planned)
            except (CleanFailedError, OSError, ValueError) as exc:
                self.stats.failures += 1
                self.failed[tp] = trio.current_time() + FAILURE_BACKOFF * max(backoff, 1.0)
                log.error("cleaning %s-%d failed (left alone for a while): %s", tp.topic, tp.partition, exc)  # noqa: TRY400
            finally:
                self._busy.discard(tp)
            await trio.sleep(0)

    async def clean_planned(self, tp: TopicPartition, plog: PartitionLog, planned: Planned) -> CleanResult:
        """Runs one planned clean of ``plog`` and installs it."""
        started = time.monotonic()
        result = await self._work(planned.request)
        now_ms = _now_ms()
        if plog.closed:
            for cleaned in result.segments:
                discard(plog.directory, cleaned.base_offset)
            return result
        whole = install(plog, planned, result, now_ms, hooks.reached)
        key = (tp.topic, tp.partition)
        if whole:
            self._first_dirty[key] = max(self._first_dirty.get(key, 0), result.cleaned_to)
            await trio.to_thread.run_sync(self._write_checkpoint)
            hooks.reached("checkpointed")
        if not result.segments and result.cleaned_to <= planned.request.first_dirty:
            self._resting[tp] = trio.current_time() + FAILURE_BACKOFF * max(self.config.backoff_ms / 1000, 1.0)
        else:
            self._resting.pop(tp, None)
        if result.next_horizon_ms is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = result.next_horizon_ms
        self.failed.pop(tp, None)
        self._account(result, time.monotonic() - started)
        log.info(
            "cleaned %s-%d to offset %d: %d of %d records kept, %.1f MB read, %.1f MB written in %.2f s "
            "(%.2f s CPU%s)",
            tp.topic, tp.partition, result.cleaned_to, result.records_kept, result.records_read,
            result.bytes_read / 1e6, result.bytes_written / 1e6, result.elapsed_s, result.cpu_s,
            f", {result.throttled_s:.2f} s throttled" if result.throttled_s else "",
        )  # fmt: skip
        self.cleaned.set()
        self.cleaned = trio.Event()
        return result

    def _account(self, result: CleanResult, seconds: float) -> None:
        stats = self.stats
        stats.cleans += 1
        stats.bytes_read += result.bytes_read
        stats.bytes_written += result.bytes_written
        stats.records_read += result.records_read
        stats.records_kept += result.records_kept
        stats.cpu_seconds += result.cpu_s
        stats.last_clean_seconds = seconds
        stats.max_clean_seconds = max(stats.max_clean_seconds, seconds)
        stats.last_run_ms = _now_ms()

    def _write_checkpoint(self) -> None:
        live = {(tp.topic, tp.partition) for tp in self._logs.partitions()}
        self._first_dirty = {key: offset for key, offset in self._first_dirty.items() if key in live}
        write_checkpoint(self._checkpoint_path, self._first_dirty)

    async def _work(self, request: CleanRequest) -> CleanResult:
        if self.config.isolation == THREAD:
            return await _in_thread(request)
        return await _in_process(request)


async def _in_thread(request: CleanRequest) -> CleanResult:
    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(clean, request, stop.is_set, abandon_on_cancel=True)
    except CleanStopped:
        raise CleanFailedError("stopped") from None
    finally:
        stop.set()  # a clean abandoned by a cancelled wait ends at its next batch


async def _in_process(request: CleanRequest) -> CleanResult:
    env = {**os.environ, hooks.BROKER_PID_ENV: str(os.getpid())}
    process = await trio.lowlevel.open_process([sys.executable, "-m", WORKER_MODULE], stdin=-1, stdout=-1, env=env)
    try:
        assert process.stdin is not None and process.stdout is not None
        # stdin stays open while the broker waits: the worker exits when it closes.
        await process.stdin.send_all(request.to_json() + b"\n")
        output = bytearray()
        while chunk := await process.stdout.receive_some(1 << 16):
            output += chunk
        code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()  # cancelled (the broker stops): its .cleaned files go at the next open
        with trio.CancelScope(shield=True):
            await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()
    if code != 0:
        raise CleanFailedError(f"the cleaner's worker exited with status {code} (its error is in the broker's log)")
    try:
        return CleanResult.from_json(bytes(output))
    except (ValueError, TypeError, KeyError) as exc:
        raise CleanFailedError(f"the cleaner's worker answered {bytes(output[:200])!r}: {exc}") from None


__all__ = ["CLEANER_CHECKPOINT", "CleanFailedError", "CleanerStats", "LogCleaner"]
