"""Reading ahead from the source: fetch requests pipelined on each broker connection.

Partitions are split among ``fetch_sessions`` workers; each worker sends one
Fetch per source leader for its ready partitions, so up to that many fetches
are in flight on a connection and a long link's round trip is hidden behind
the previous response. A partition is in at most one fetch at a time (its
next offset is known only once the previous answer arrived) and stops being
fetched while its fetched-but-uncopied bytes exceed one partition fetch; the
whole mirror stops fetching while the byte budget is spent. Fetched bytes pass
the bandwidth cap before the next fetch.

Fetches use READ_COMMITTED, so the source returns only committed data and
names the aborted transactions for the copier to drop.
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

log = logging.getLogger("tributary.mirror")


class SourceFetcher:
    def __init__(self, ctx: MirrorContext, partitions: Callable[[], list[PartitionState]]) -> None:
        self.ctx = ctx
        self._partitions = partitions
        self._backoff: dict[int, float] = {}

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for session in range(self.ctx.config.fetch_sessions):
                nursery.start_soon(self._worker, session)

    def _ready(self, session: int) -> list[PartitionState]:
        limit = self.ctx.config.fetch_partition_max_bytes
        return [s for s in self._partitions() if s.session == session and s.fetch_ready(limit)]

    async def _worker(self, session: int) -> None:
        ctx = self.ctx
        while True:
            if ctx.fetch_wanted.is_set():
                ctx.fetch_wanted = trio.Event()
            wanted = ctx.fetch_wanted
            ready = self._ready(session)
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
        reserve = min(max_bytes, config.fetch_partition_max_bytes * len(states))
        await ctx.budget.acquire(reserve)
        offsets: dict[TopicPartition, int] = {}
        epochs: dict[TopicPartition, int] = {}
        for state in states:
            if state.position is None:
                continue
            state.fetching = True
            offsets[state.source] = state.position
            epochs[state.source] = state.epoch
        used = 0
        try:
            results = await ctx.source_raw.fetch(
                leader, offsets, max_wait_ms=config.fetch_max_wait_ms, max_bytes=max_bytes,
                partition_max_bytes=config.fetch_partition_max_bytes, isolation_level=READ_COMMITTED,
            )  # fmt: skip
            failure: KafkaError | None = None
            for state in states:
                result = results.get(state.source)
                if result is None or state.epoch != epochs.get(state.source) or state.stopping:
                    continue
                if isinstance(result, KafkaError):
                    failure = failure or result
                    self._partition_error(state, result)
                    continue
                used += self._deliver(state, result)
            if failure is None:
                ctx.source_link.up()
                self._backoff.pop(leader, None)
            else:
                await self._pause(leader, failure)
        finally:
            for state in states:
                state.fetching = False
            ctx.budget.release(reserve - used)
        await ctx.throttle.consumed(used)

    def _deliver(self, state: PartitionState, fetched: RawBatches) -> int:
        """Hand a fetch result to the copier; the bytes it keeps reserved."""
        state.high_watermark = fetched.high_watermark
        if fetched.truncated_bytes and not fetched.batches:
            self.ctx.metrics.error("batch_too_large")
            log.error(
                "event=batch_too_large source=%s offset=%d: raise fetch-partition-max-bytes",
                state.source, fetched.fetch_offset,
            )  # fmt: skip
        if not fetched.batches:
            return 0
        size = len(fetched.records)
        state.position = fetched.next_offset
        state.queued_bytes += size
        state.inbox_send.send_nowait(Delivery(state.epoch, fetched, size))
        return size

    def _partition_error(self, state: PartitionState, error: KafkaError) -> None:
        if isinstance(error, OffsetOutOfRangeError):
            # The source deleted data before it was copied (retention outran the mirror):
            # it is gone; say so loudly and continue from the source's start.
            start = error.log_start_offset
            if start is not None and state.position is not None and start > state.position:
                self.ctx.metrics.error("source_data_lost")
                log.error(
                    "event=source_data_lost source=%s lost_from=%d lost_to=%d",
                    state.source, state.position, start,
                )  # fmt: skip
                state.position = start
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
