"""Reading ahead from the source: fetch requests pipelined on each broker connection.

``fetch_sessions`` workers each build a Fetch per source leader from the next window of
every partition that wants one (:mod:`mirror.windows`: up to ``fetch_windows`` fetches of a
partition in flight, at estimated offsets, while the source holds more than they cover),
send it, and hand the answers to the copiers in order. So up to that many fetches are in
flight on a connection and a long link's round trip is hidden behind the answers before it,
for one partition as for many. A request carries at most as many partitions as its byte
limit holds whole partition fetches, so no window comes back empty for lack of room. A
partition stops reading ahead while what it fetched and has not copied fills its windows;
the whole mirror stops fetching while the byte budget is spent. Fetched bytes pass the
bandwidth cap before the worker's next fetch.

Fetches use READ_COMMITTED, so the source returns only committed data and names the
aborted transactions for the copier to drop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from tributary.client.errors import KafkaConnectionError, KafkaError, OffsetOutOfRangeError
from tributary.client.raw.batches import READ_COMMITTED, RawBatches
from tributary.client.wire.metadata import TopicPartition
from tributary.mirror.context import MirrorContext
from tributary.mirror.partition import Delivery, PartitionState
from tributary.mirror.windows import Window

log = logging.getLogger("tributary.mirror")


class SourceFetcher:
    def __init__(self, ctx: MirrorContext, partitions: Callable[[], list[PartitionState]]) -> None:
        self.ctx = ctx
        self._partitions = partitions
        self._backoff: dict[int, float] = {}

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(self.ctx.config.fetch_sessions):
                nursery.start_soon(self._worker)

    def _wanting(self) -> list[PartitionState]:
        """Partitions with a window to fetch (only asked, not yet taken)."""
        size = self.ctx.config.fetch_partition_max_bytes
        return [s for s in self._partitions() if s.next_window(size) is not None]

    async def _worker(self) -> None:
        ctx = self.ctx
        while True:
            if ctx.fetch_wanted.is_set():
                ctx.fetch_wanted = trio.Event()
            wanted = ctx.fetch_wanted
            ready = self._wanting()
            if not ready:
                await wanted.wait()
                continue
            by_leader: dict[int, list[PartitionState]] = {}
            for state in ready:
                try:
                    leader = await ctx.source.leader_for(state.source.topic, state.source.partition)
                except KafkaError as exc:
                    self._failed(None, exc)
                    continue
                by_leader.setdefault(leader, []).append(state)
            if not by_leader:
                await trio.sleep(ctx.source.config.retry_backoff)
                continue
            async with trio.open_nursery() as nursery:
                for leader, states in by_leader.items():
                    nursery.start_soon(self._fetch, leader, states)

    def _request_bytes(self) -> int:
        """Bytes one fetch may ask for. Under a bandwidth cap, no more than every session's
        fetch can bring in a quarter of the request timeout at that rate, so a capped link
        never turns large fetches into timeouts (and their retries into wasted bytes)."""
        config = self.ctx.config
        limit = config.fetch_max_bytes
        rate = config.bandwidth_bytes_per_second
        if rate is not None:
            budget = int(rate * config.request_timeout_ms / 1000 / 4 / config.fetch_sessions)
            limit = min(limit, max(budget, config.fetch_partition_max_bytes))
        return limit

    async def _fetch(self, leader: int, states: list[PartitionState]) -> None:
        ctx, config = self.ctx, self.ctx.config
        max_bytes = self._request_bytes()
        size = config.fetch_partition_max_bytes
        room = max(1, max_bytes // size)  # whole partition fetches the request has room for
        reserve = min(max_bytes, size * min(len(states), room))
        await ctx.budget.acquire(reserve)
        # Taken only now: while this worker waited for the budget, others may have taken some.
        taken: list[tuple[PartitionState, Window, int]] = []
        for state in states:
            if len(taken) == room:
                break
            window = state.next_window(size)
            if window is None:
                continue
            assert state.windows is not None
            state.windows.sent(window)
            taken.append((state, window, state.epoch))
        if taken:
            ctx.wake_fetcher()  # other workers may send the windows after these
        try:
            if taken:
                await self._send(leader, taken, max_bytes)
        finally:
            # Answers kept (handed on, or waiting for the windows before them) took their own
            # share of the budget; the reservation made room for them while in flight.
            ctx.budget.release(reserve)

    async def _send(self, leader: int, taken: list[tuple[PartitionState, Window, int]], max_bytes: int) -> None:
        """One Fetch of the windows taken; answers handed to the copiers as they come due."""
        ctx, config = self.ctx, self.ctx.config
        offsets: dict[TopicPartition, int] = {state.source: window.start for state, window, _ in taken}
        results = await ctx.source_raw.fetch(
            leader, offsets, max_wait_ms=config.fetch_max_wait_ms, max_bytes=max_bytes,
            partition_max_bytes=config.fetch_partition_max_bytes, isolation_level=READ_COMMITTED,
        )  # fmt: skip
        received = 0
        failure: KafkaError | None = None
        for state, window, epoch in taken:
            result = results.get(state.source)
            windows = state.windows
            if result is None or windows is None or state.epoch != epoch or state.stopping:
                continue
            if not windows.knows(window):
                continue
            if isinstance(result, KafkaError):
                failure = failure or result
                self._partition_error(state, window, result)
            else:
                received += len(result.records)
                ctx.budget.take(len(result.records))
                state.high_watermark = result.high_watermark
                if result.truncated_bytes and not result.batches and window.start == windows.frontier:
                    ctx.metrics.error("batch_too_large")
                    log.error(
                        "event=batch_too_large source=%s offset=%d: raise fetch-partition-max-bytes",
                        state.source, result.fetch_offset,
                    )  # fmt: skip
                for due in windows.answered(window, result):
                    self._deliver(state, due)
            for dropped in windows.take_dropped():
                ctx.budget.release(len(dropped.records))
        if failure is None:
            ctx.source_link.up()
            self._backoff.pop(leader, None)
        ctx.wake_fetcher()
        await ctx.throttle.consumed(received)
        if failure is not None:
            await self._pause(leader, failure)

    def _deliver(self, state: PartitionState, fetched: RawBatches) -> None:
        """Hand a fetch result to the copier, which lets go of its bytes once copied."""
        size = len(fetched.records)
        state.queued_bytes += size
        state.inbox_send.send_nowait(Delivery(state.epoch, fetched, size))

    def _partition_error(self, state: PartitionState, window: Window, error: KafkaError) -> None:
        windows = state.windows
        assert windows is not None
        head = window.start == windows.frontier
        windows.failed(window)
        if isinstance(error, OffsetOutOfRangeError) and head:
            # The source deleted data before it was copied (retention outran the mirror):
            # it is gone; say so loudly and continue from the source's start.
            start = error.log_start_offset
            if start is not None and start > windows.frontier:
                self.ctx.metrics.error("source_data_lost")
                log.error(
                    "event=source_data_lost source=%s lost_from=%d lost_to=%d",
                    state.source, windows.frontier, start,
                )  # fmt: skip
                windows.frontier = start
                return
        self._failed(state.source, error)

    def _failed(self, tp: TopicPartition | None, error: KafkaError) -> None:
        if isinstance(error, KafkaConnectionError):
            self.ctx.source_link.down(error)
        else:
            self.ctx.metrics.error("fetch")
            log.debug("fetch error for %s: %s", tp, error)

    async def _pause(self, leader: int, error: KafkaError) -> None:
        """Back off from a leader that failed, doubling up to the configured maximum."""
        current = self._backoff.get(leader, self.ctx.source.config.retry_backoff)
        self._backoff[leader] = min(current * 2, self.ctx.config.reconnect_backoff_max_ms / 1000)
        await trio.sleep(current)


__all__ = ["SourceFetcher"]
