"""One source partition's copy: recover the position, then copy batch after batch.

The fetcher (:mod:`mirror.fetcher`) reads ahead into the partition's inbox;
the copier produces each selected batch to the same partition of the
aggregate topic, one at a time and with acks=all, so the aggregate holds the
batches in source order. After each acknowledgement it advances ``copied``
(the pair of positions a checkpoint records) and records the translation entry.

A produce that fails for a reason that may pass (a lost connection, a leader
that moved, a timeout) leaves the outcome unknown: the batch may have been
appended, and under replication it may even become committed later, on the
old leader or on the new one. So each batch carries the copier's own
idempotent producer id and sequence (a fresh id after every recovery), and
the same bytes are sent again until acknowledged: a leader that holds the
batch answers with the offsets it got the first time, as it does for any
idempotent producer. A final error (the aggregate refused the batch) instead
discards what was fetched ahead, reconciles from the last acknowledged
position (:func:`mirror.recovery.reconcile`) with backoff until both sides
answer, and resumes from there.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import trio

from tributary.client.errors import CorruptMessageError, KafkaConnectionError, KafkaError
from tributary.client.producer.idempotence import init_producer_id
from tributary.client.raw.batches import ProduceResult, RawBatches
from tributary.client.wire.metadata import TopicPartition
from tributary.mirror.batches import SourceBatch, Stamp, StampedFetch, stamp_fetch
from tributary.mirror.checkpoint import Checkpoint
from tributary.mirror.context import MirrorContext
from tributary.mirror.offset_map import MappingEntry
from tributary.mirror.recovery import RecoveryError, reconcile
from tributary.mirror.windows import FetchWindows, Window
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records import BatchHeader, verify_crc

log = logging.getLogger("tributary.mirror")

#: How long a partition behind its source may copy nothing before its reading state is logged.
STALL_SECONDS = 30.0


class SourceBatchCorrupt(Exception):
    """A source batch whose bytes do not match its CRC: it cannot be copied, and the batches
    after it may not be copied past it."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A fetch result handed to the copier; ``reserved`` bytes of the budget go with it."""

    epoch: int
    fetched: RawBatches
    reserved: int


@dataclass(eq=False)
class PartitionState:
    source: TopicPartition
    target: TopicPartition
    inbox_send: trio.MemorySendChannel[Delivery]
    inbox: trio.MemoryReceiveChannel[Delivery]
    #: The fetches in flight and where the next starts (:mod:`mirror.windows`); None while
    #: the partition must not be fetched.
    windows: FetchWindows | None = None
    #: Bumped whenever fetched-ahead data must be thrown away.
    epoch: int = 0
    queued_bytes: int = 0
    high_watermark: int = -1
    #: The positions after the last batch the aggregate acknowledged, and after the last checkpoint.
    copied: Checkpoint | None = None
    #: The positions up to which translation entries were handed to the offsets-topic producer:
    #: what a checkpoint may cover. (``copied`` runs ahead by at most one fetch.)
    recorded: Checkpoint | None = None
    committed: Checkpoint | None = None
    #: maxTimestamp (ms) of the newest copied batch.
    last_timestamp_ms: int = -1
    stopping: bool = False
    #: While the copier waits (for the group to count this instance in again, or before
    #: sending a batch again): stop() cancels it.
    membership_wait: trio.CancelScope | None = None
    done: trio.Event = field(default_factory=trio.Event)

    @classmethod
    def create(cls, source: TopicPartition, target: TopicPartition) -> PartitionState:
        send, receive = trio.open_memory_channel[Delivery](float("inf"))
        return cls(source, target, send, receive)

    def next_window(self, window_bytes: int) -> Window | None:
        """The fetch to send next for this partition, or None: while it is copied (not
        paused or stopping), with what it fetched and has not copied yet, plus what is in
        flight, under the windows' depth of ``window_bytes`` each."""
        windows = self.windows
        if windows is None or self.stopping:
            return None
        # A gap's window goes out regardless: the answers held behind it count as in flight.
        full = self.queued_bytes + windows.in_flight * window_bytes >= windows.depth * window_bytes
        if full and not windows.gap_waiting:
            return None
        return windows.next_window()

    def restart_at(self, checkpoint: Checkpoint, *, window_bytes: int, depth: int) -> None:
        self.epoch += 1
        self.copied = self.recorded = checkpoint
        self.windows = FetchWindows(checkpoint.source, window_bytes=window_bytes, depth=depth)

    def stop(self) -> None:
        """Stop after the batch in flight, if any; no new batch is started."""
        self.stopping = True
        self.inbox_send.close()
        if self.membership_wait is not None:
            self.membership_wait.cancel()

    def pause(self) -> int:
        """Stop fetching; the bytes of answers the windows held (for the caller to release)."""
        self.epoch += 1
        held = 0 if self.windows is None else sum(len(answer.records) for answer in self.windows.held())
        self.windows = None
        return held

    def lag_records(self) -> int:
        if self.copied is None or self.high_watermark < 0:
            return 0
        return max(0, self.high_watermark - self.copied.source)


class PartitionCopier:
    def __init__(self, ctx: MirrorContext, state: PartitionState) -> None:
        self.ctx = ctx
        self.state = state
        self.alias = ctx.config.source_alias
        #: The idempotent producer fields of the next batch (a new producer id per recovery).
        self.stamp = Stamp(-1, -1, 0)
        #: The source position last seen moving and when (trio's clock), for :meth:`update_lag`;
        #: whether the stall since then was logged.
        self._progress: tuple[int, float] = (-1, 0.0)
        self._stall_logged = False

    # --- start: where to resume -----------------------------------------------------------------

    async def _start_checkpoint(self, saved: Checkpoint | None) -> Checkpoint:
        """The checkpoint to reconcile from: the saved one, or for a partition never
        copied, the source's start matched against the aggregate's start."""
        if saved is not None:
            return saved
        ctx, state = self.ctx, self.state
        target_start = (await ctx.target_admin.earliest_offsets([state.target]))[state.target]
        target_end = (await ctx.target_admin.latest_offsets([state.target]))[state.target]
        if target_end == target_start and ctx.config.start_position == "latest":
            source_end = (await ctx.source_admin.latest_offsets([state.source]))[state.source]
            return Checkpoint(source_end, target_end)
        source_start = (await ctx.source_admin.earliest_offsets([state.source]))[state.source]
        return Checkpoint(source_start, target_start)

    async def _rerecord(self, source: SourceBatch, aggregate: BatchHeader) -> None:
        for entry in self._entries(source, aggregate.base_offset):
            await self.ctx.mapping.add(entry)

    def _entries(self, source: SourceBatch, aggregate_base: int) -> list[MappingEntry]:
        """The translation of one copied batch: an entry per run of consecutive source offsets
        (one, unless a log cleaner left gaps inside the batch)."""
        tp = self.state.source
        return [
            MappingEntry(self.alias, tp.topic, tp.partition, run.first, run.last, aggregate_base + run.position)
            for run in source.runs
        ]

    async def recover(self, saved: Checkpoint | None = None, *, first: bool = False) -> None:
        """Find the exact resume position, retrying with backoff while either side is
        unreachable. The first time, the aggregate topic is made to exist and the saved
        checkpoint is read; later (after a failed produce) ``saved`` is the last acknowledged position."""
        ctx, state = self.ctx, self.state
        ctx.budget.release(state.pause())
        backoff = ctx.source.config.retry_backoff
        while True:
            try:
                if first:
                    await ctx.topics.ensure(state.source.topic)
                    saved = (await ctx.checkpoints.load([state.target]))[state.target]
                    first = False
                start = await self._start_checkpoint(saved)
                checkpoint = await reconcile(
                    source=ctx.source_raw, target=ctx.target_raw, target_admin=ctx.target_admin,
                    source_tp=state.source, target_tp=state.target, checkpoint=start, matched=self._rerecord,
                )  # fmt: skip
                # What was sent under the previous producer id is settled by now (found in the
                # aggregate, or not there): the batches from here on are numbered afresh.
                producer_id, epoch = await init_producer_id(ctx.target, timeout=ctx.target.config.request_timeout)
                self.stamp = Stamp(producer_id, epoch, 0)
            except KafkaError as exc:
                ctx.metrics.error("recover")
                log.warning("event=recover_retry source=%s error=%r backoff_s=%.1f", state.source, str(exc), backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, ctx.config.reconnect_backoff_max_ms / 1000)
                continue
            break
        config = ctx.config
        state.restart_at(checkpoint, window_bytes=config.fetch_partition_max_bytes, depth=config.fetch_windows)
        ctx.wake_fetcher()
        log.info(
            "event=partition_resumed source=%s target=%s source_offset=%d aggregate_offset=%d",
            state.source, state.target, checkpoint.source, checkpoint.aggregate,
        )  # fmt: skip

    # --- the copy loop --------------------------------------------------------------------------

    async def run(self) -> None:
        state = self.state
        try:
            await self.recover(first=True)
            async for delivery in state.inbox:
                try:
                    if delivery.epoch == state.epoch and not state.stopping:
                        await self._copy(delivery.fetched)
                finally:
                    state.queued_bytes -= delivery.reserved
                    self.ctx.budget.release(delivery.reserved)
                    self.ctx.wake_fetcher()
                if state.stopping:
                    break
        except RecoveryError as exc:
            self.ctx.metrics.error("reconcile")
            log.error("event=partition_stopped source=%s error=%r", state.source, str(exc))  # noqa: TRY400
        except SourceBatchCorrupt as exc:
            self.ctx.metrics.error("source_batch_corrupt")
            log.error("event=partition_stopped source=%s error=%r", state.source, str(exc))  # noqa: TRY400
        finally:
            self.ctx.budget.release(state.pause())
            # What was fetched ahead and never copied gives its share of the budget back.
            state.inbox_send.close()
            while True:
                try:
                    delivery = state.inbox.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                state.queued_bytes -= delivery.reserved
                self.ctx.budget.release(delivery.reserved)
            state.done.set()

    async def _copy(self, fetched: RawBatches) -> None:
        """Copy the selected batches of one fetch, in order: handed to the producer as one run,
        sent again from the first unacknowledged one after a failure that may pass.

        This is the mirror's per-batch path, so it works on plain ints per batch: the
        checkpoint, the stamp and the translation entry are built once per answer (or where
        a translation run breaks), not once per batch."""
        ctx, state = self.ctx, self.state
        assert state.copied is not None
        state.high_watermark = max(state.high_watermark, fetched.high_watermark)
        stamp = self.stamp
        fetched_run = stamp_fetch(fetched, state.copied.source, stamp)
        payloads = fetched_run.payloads
        # Consecutive batches whose offsets moved by the same amount need one translation
        # entry between them, not one each: the entry covers the run. ``run`` holds
        # (source base, source last, aggregate base) of the entry being extended.
        run: tuple[int, int, int] | None = None
        done = 0
        total = len(payloads)
        backoff = ctx.target.config.retry_backoff
        while done < total and not state.stopping:
            results, error = await self._produce(payloads[done:] if done else payloads)
            if results:
                run = await self._acknowledged(results, fetched_run, done, run)
                done += len(results)
                self.stamp = Stamp(stamp.producer_id, stamp.producer_epoch, fetched_run.sequences[done])
                backoff = ctx.target.config.retry_backoff
            if error is None:
                continue  # everything acknowledged, or paused (stopping, or waiting for the group)
            if isinstance(error, CorruptMessageError):
                damage = _source_damage(fetched_run, done)
                if damage is not None:
                    await self._record(run)  # what was acknowledged before it stays recorded
                    raise SourceBatchCorrupt(damage)
            if not error.retriable:
                await self._record(run)
                if not state.stopping:
                    await self.recover(state.copied)
                return
            with trio.CancelScope() as state.membership_wait:
                await trio.sleep(backoff)
            state.membership_wait = None
            backoff = min(backoff * 2, ctx.config.reconnect_backoff_max_ms / 1000)
        # The batches after the last copied one (markers, aborted transactions) are skipped for good.
        if done == total and fetched.next_offset > state.copied.source and not state.stopping:
            state.copied = Checkpoint(fetched.next_offset, state.copied.aggregate)
        await self._record(run)

    async def _acknowledged(
        self, results: list[ProduceResult], batches: StampedFetch, done: int, run: tuple[int, int, int] | None
    ) -> tuple[int, int, int] | None:
        """Take in the answers to ``batches`` from index ``done`` on: advance ``copied``, extend
        the translation run, recording the one a batch breaks; the run being extended after."""
        ctx, state = self.ctx, self.state
        assert state.copied is not None
        headers, payloads, renumbered = batches.headers, batches.payloads, batches.renumbered
        copied_source, copied_aggregate = state.copied.source, state.copied.aggregate
        last_timestamp = state.last_timestamp_ms
        records = size = 0
        for index, result in enumerate(results, done):
            header = headers[index]
            base = result.base_offset
            if base != copied_aggregate:
                # Someone else appended to the aggregate partition: the copy is still exact
                # (translation uses the real offset), but it is worth an operator's look.
                ctx.metrics.error("aggregate_offset_gap")
                log.warning(
                    "event=aggregate_offset_gap target=%s expected=%d got=%d", state.target, copied_aggregate, base
                )
            before = (copied_source, copied_aggregate)
            source_base = header.base_offset
            copied_source = source_base + header.last_offset_delta + 1
            prepared = renumbered.get(index) if renumbered else None
            pieces: tuple[tuple[int, int, int], ...]
            if prepared is None:
                pieces = ((source_base, copied_source - 1, base),)
                copied_aggregate = base + header.last_offset_delta + 1
            else:
                pieces = tuple((r.first, r.last, base + r.position) for r in prepared.runs)
                copied_aggregate = base + prepared.header.last_offset_delta + 1
            for first, last, landed in pieces:
                if run is not None and run[1] + 1 == first and run[2] - run[0] == landed - first:
                    run = (run[0], last, run[2])
                else:
                    # A checkpoint may cover what came before this batch, not yet the batch.
                    state.copied = Checkpoint(copied_source, copied_aggregate)
                    await self._record(run, Checkpoint(*before))
                    run = (first, last, landed)
            last_timestamp = max(last_timestamp, header.max_timestamp)
            records += header.record_count
            size += len(payloads[index])
        state.copied = Checkpoint(copied_source, copied_aggregate)
        state.last_timestamp_ms = last_timestamp
        ctx.target_link.up()
        ctx.metrics.copied(state.source.topic, batches=len(results), records=records, size=size)
        return run

    async def _record(self, run: tuple[int, int, int] | None, upto: Checkpoint | None = None) -> None:
        """Write a run's translation entry, (source base, source last, aggregate base); from then
        on, a checkpoint may cover what was copied (up to ``upto``, when the batch just copied
        still has entries to come)."""
        if run is not None:
            tp = self.state.source
            await self.ctx.mapping.add(MappingEntry(self.alias, tp.topic, tp.partition, *run))
        self.state.recorded = self.state.copied if upto is None else upto

    def _may_send(self) -> bool:
        return not self.state.stopping and self.ctx.counted_in()

    async def _produce(self, payloads: list[BytesLike]) -> tuple[list[ProduceResult], KafkaError | None]:
        """Send a run of stamped batches once the group counts this instance in: the results of
        the acknowledged prefix, and the error that ended it (logged and counted here)."""
        ctx, state = self.ctx, self.state
        with trio.CancelScope() as state.membership_wait:
            # (cancelled by stop(): nothing is in flight while waiting here)
            await ctx.wait_for_membership()
        state.membership_wait = None
        if state.stopping:
            return [], None
        results, error = await ctx.producer.produce_run(state.target, payloads, self._may_send)
        if error is not None:
            ctx.metrics.error("produce")
            if isinstance(error, KafkaConnectionError):
                ctx.target_link.down(error)
            if error.retriable:
                log.warning("event=produce_retry target=%s error=%r", state.target, str(error))
            else:
                log.warning("event=produce_failed target=%s error=%r (reconciling)", state.target, str(error))
        return results, error

    def update_lag(self) -> None:
        state = self.state
        lag = state.lag_records()
        # Behind, or unable to tell (the source is unreachable, so its end is unknown): the lag
        # is the age of the newest record copied. Caught up: none.
        behind = lag > 0 or self.ctx.source_link.is_up is False
        seconds = 0.0
        if behind and state.last_timestamp_ms > 0:
            seconds = max(0.0, time.time() - state.last_timestamp_ms / 1000)
        self.ctx.metrics.lag(state.source.topic, state.source.partition, records=lag, seconds=seconds)
        self._watch_progress(lag)

    def _watch_progress(self, lag: int) -> None:
        """Log once where the partition's reading stands when it is behind the source's high
        watermark and nothing was copied for STALL_SECONDS: the source or the aggregate
        unreachable (their own events say so), an open transaction holding the last stable
        offset back, a compacted source whose last records are gone (a fetch finds nothing
        below its high watermark), or a reader stuck, which this line lets one tell apart."""
        state = self.state
        now = trio.current_time()
        position = -1 if state.copied is None else state.copied.source
        if position != self._progress[0] or lag == 0:
            self._progress = (position, now)
            self._stall_logged = False
            return
        if self._stall_logged or now - self._progress[1] < STALL_SECONDS:
            return
        self._stall_logged = True
        windows = state.windows
        log.info(
            "event=partition_no_progress source=%s copied=%d high_watermark=%d seconds=%.0f queued_bytes=%d %s",
            state.source, position, state.high_watermark, now - self._progress[1], state.queued_bytes,
            "fetching=no (paused or recovering)" if windows is None else windows.describe(),
        )  # fmt: skip


def _source_damage(batches: StampedFetch, index: int) -> str | None:
    """Why the batch the aggregate refused as corrupt came damaged from the source, if it did:
    stamping carries the source's CRC over the mirror's changes, so the batch's own CRC still
    tells. None: it was damaged on the way to the aggregate, and is sent again."""
    try:
        verify_crc(batches.payloads[index])
    except CorruptRecordError as exc:
        first = batches.headers[index].base_offset
        last = first + batches.headers[index].last_offset_delta
        return f"the source batch at offsets {first}-{last} fails its CRC ({exc}): neither it nor the rest is copied"
    return None


__all__ = ["Delivery", "PartitionCopier", "PartitionState", "SourceBatchCorrupt"]
