"""Fetching for the consumer: Fetch requests per leader, a prefetch buffer, decoding on demand.

Theory of operation
-------------------
:meth:`Fetcher.run` is one background task. Whenever something changes (a
partition assigned, sought, resumed, drained; a fetch answered; new metadata)
it groups the *fetchable* partitions by leader and sends each leader with no
fetch in flight one Fetch for all of them, so there is at most one fetch in
flight per broker. A partition is fetchable when its position is known, it is
neither paused nor failed nor backing off, and it has no answer queued: the
answer being handed out does not count, so the next fetch of a partition
goes out while the application works through the previous one (prefetching,
one fetch ahead, which bounds the buffer to about two fetches per partition).

Fetches start at a partition's ``fetch_offset``, which runs ahead of its
``position`` while answers are buffered. Each answer is checked against the
partition's ``epoch`` when it arrives and again when it is handed out: a seek,
reset or revocation in between makes it stale, and it is dropped.

Answers are kept undecoded (:class:`~client.batches.RawBatches`) and decoded a
batch at a time as the application takes records (:meth:`take`,
:meth:`next_record`): decompression and decoding happen at the pace of
consumption, and records skipped by a seek are never decoded. A batch may start
before the position (brokers send the whole batch holding the fetch offset);
the records below it are dropped. Control batches (transaction markers) are
skipped, and the position then moves past them and past offsets removed by
compaction, to the batch's next offset. With ``isolation_level`` "read_committed"
fetches ask for committed data only (the broker stops at the last stable offset),
and batches of the aborted transactions the answer names are skipped the same way.

Errors: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, a lost connection
and the other retriable errors schedule a metadata refresh and back the
partition off for ``retry_backoff``; the next fetch goes to whichever broker
the metadata then names. OFFSET_OUT_OF_RANGE resets the position by
``auto_offset_reset``, or with "none" fails the partition: poll raises the
error until the application seeks. Unknown positions (new partitions, pending
resets) are resolved here too: the group's committed offset, else the reset
policy through ListOffsets.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any

import trio

from tributary.client.admin.admin import Admin
from tributary.client.consumer.config import ConsumerConfig
from tributary.client.consumer.errors import NoOffsetForPartitionError
from tributary.client.consumer.record import ConsumerRecord, decode_batch, record_type_for
from tributary.client.consumer.subscription import PartitionState, SubscriptionState
from tributary.client.errors import CorruptMessageError, KafkaError, MessageTooLargeError, OffsetOutOfRangeError
from tributary.client.group.offsets import GroupOffsets
from tributary.client.raw.batches import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTransactions,
    RawBatches,
    fetch_request,
    fetch_timeout,
    parse_fetch_response,
)
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.errors import ProtocolError

log = logging.getLogger(__name__)

#: The connection purpose of fetches: long polls on a connection of their own
#: never hold up metadata or ListOffsets requests to the same broker.
FETCH = "fetch"


class CompletedFetch:
    """One partition's share of a fetch answer, handed out batch by batch."""

    __slots__ = (
        "aborted",
        "batch_index",
        "batch_next_offset",
        "epoch",
        "index",
        "raw",
        "records",
        "started",
        "state",
        "tp",
    )

    def __init__(self, tp: TopicPartition, state: PartitionState, raw: RawBatches, read_committed: bool) -> None:
        self.tp = tp
        self.state = state
        self.epoch = state.epoch
        self.raw = raw
        #: read_committed: which batches belong to aborted transactions (None: read everything).
        self.aborted = AbortedTransactions(raw.aborted_transactions) if read_committed else None
        self.batch_index = 0
        #: The decoded records of the current batch, and the next one to hand out.
        self.records: list[ConsumerRecord] = []
        self.index = 0
        self.batch_next_offset = -1
        self.started = False

    @property
    def stale(self) -> bool:
        return self.state.epoch != self.epoch

    def take_into(self, out: list[ConsumerRecord], limit: int, check_crc: bool) -> bool:
        """Move records into ``out`` until it holds ``limit``, advancing the position;
        True once every batch is handed out."""
        state = self.state
        while len(out) < limit:
            records = self.records
            if self.index >= len(records):
                if not self.next_batch(check_crc):
                    return True
                records = self.records
            start = self.index
            want = limit - len(out)
            if start == 0 and len(records) <= want:
                out += records
                self.index = len(records)
            else:
                chunk = records[start : start + want]
                out += chunk
                self.index = start + len(chunk)
            if self.index >= len(records):
                # Past the batch's end, the position skips what compaction left out.
                state.position = self.batch_next_offset
            else:
                state.position = records[self.index - 1].offset + 1
        return self.index >= len(self.records) and self.batch_index >= len(self.raw.batches)

    def next_batch(self, check_crc: bool) -> bool:
        """Decode the next batch holding records at or above the position; False at the end."""
        state = self.state
        batches = self.raw.batches
        topic, partition = self.tp
        while self.batch_index < len(batches):
            pos, header = batches[self.batch_index]
            self.batch_index += 1
            position = state.position
            assert position is not None
            next_offset = header.next_offset
            aborted = self.aborted
            # Fed every batch in order, even those before the position: the set of aborted
            # producers is built from the markers met on the way.
            dropped = aborted is not None and aborted.drops(header, self.raw.records, pos)
            if next_offset <= position:
                continue
            if header.is_control or dropped:  # a transaction marker, or an aborted transaction's data
                state.position = next_offset
                continue
            try:
                record_type = record_type_for(topic, partition, header.timestamp_type, header.partition_leader_epoch)
                records = decode_batch(
                    record_type,
                    self.raw.records,
                    pos,
                    skip_below=position if header.base_offset < position else None,
                    check_crc=check_crc,
                )
            except ProtocolError as exc:
                message = f"{self.tp}: the batch at offset {header.base_offset} does not decode: {exc}"
                error = CorruptMessageError(message, topic=topic, partition=partition)
                state.fail(error)
                raise error from exc
            if not records:
                state.position = next_offset
                continue
            self.records = records
            self.index = 0
            self.batch_next_offset = next_offset
            return True
        self.records = []
        self.index = 0
        return False


class Fetcher:
    """Fetches for a consumer's assigned partitions and hands out their records."""

    def __init__(
        self, cluster: Cluster, subscriptions: SubscriptionState, config: ConsumerConfig, offsets: GroupOffsets | None
    ) -> None:
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.config = config
        self.offsets = offsets
        self._completed: deque[CompletedFetch] = deque()
        self._brokers_in_flight: set[int] = set()
        self._wake = trio.Event()
        self._data = trio.Event()
        self._positions = trio.Event()
        #: While set, unknown positions are not looked up: the application's
        #: on_assign callback may still seek them.
        self.hold_positions = False
        #: Counters for tests and benchmarks.
        self.fetches_sent = 0

    # --- signals -------------------------------------------------------------------------------

    def wake(self) -> None:
        """Something changed: look for fetches or lookups to start."""
        self._wake.set()

    def _signal_data(self) -> None:
        self._data.set()

    async def wait_for_data(self) -> None:
        """Until an answer or a partition error arrives (or :meth:`interrupt`)."""
        if self._data.is_set():
            self._data = trio.Event()
        await self._data.wait()

    def interrupt(self) -> None:
        """Wake whoever waits in :meth:`wait_for_data`."""
        self._data.set()

    # --- the background task -------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow_metadata)
            while True:
                self._wake = trio.Event()
                wake_at = self._start_work(nursery)
                with trio.move_on_at(wake_at):
                    await self._wake.wait()

    async def _follow_metadata(self) -> None:
        while True:
            await self.cluster.next_metadata()
            self.wake()

    def _start_work(self, nursery: trio.Nursery) -> float:
        """Start the fetches and lookups that can start; when to look again at the latest."""
        now = trio.current_time()
        metadata = self.cluster.metadata
        wake_at = math.inf
        by_leader: dict[int, dict[TopicPartition, PartitionState]] = {}
        unresolved: list[TopicPartition] = []
        for tp, state in self.subscriptions.partitions.items():
            if state.position is None:
                if state.error is None and not state.resolving:
                    unresolved.append(tp)
                continue
            if not state.fetchable(now):
                if state.retry_at > now:
                    wake_at = min(wake_at, state.retry_at)
                continue
            leader = metadata.leader(tp.topic, tp.partition)
            if leader is None:
                self.cluster.request_metadata_refresh()
                state.retry_at = now + self.cluster.config.retry_backoff
                wake_at = min(wake_at, state.retry_at)
                continue
            if leader not in self._brokers_in_flight:
                by_leader.setdefault(leader, {})[tp] = state
        for leader, states in by_leader.items():
            self._brokers_in_flight.add(leader)
            for state in states.values():
                state.in_flight = True
            # Offsets and epochs as of now: the task starts later, maybe after a seek.
            offsets = {tp: state.fetch_offset for tp, state in states.items()}
            epochs = {tp: state.epoch for tp, state in states.items()}
            nursery.start_soon(self._fetch, leader, states, offsets, epochs)
        if unresolved and not self.hold_positions:
            states = {tp: self.subscriptions.partitions[tp] for tp in unresolved}
            for state in states.values():
                state.resolving = True
            epochs = {tp: state.epoch for tp, state in states.items()}
            nursery.start_soon(self._resolve_positions, states, epochs)
        return wake_at

    # --- fetching ------------------------------------------------------------------------------

    async def _fetch(
        self,
        leader: int,
        states: dict[TopicPartition, PartitionState],
        offsets: dict[TopicPartition, int],
        epochs: dict[TopicPartition, int],
    ) -> None:
        config = self.config
        request = fetch_request(
            offsets,
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            partition_max_bytes=config.max_partition_fetch_bytes,
            isolation_level=READ_COMMITTED if config.read_committed else READ_UNCOMMITTED,
        )
        results: dict[TopicPartition, RawBatches | KafkaError]
        try:
            self.fetches_sent += 1
            response: Any = await self.cluster.send(
                leader,
                request,
                timeout=fetch_timeout(self.cluster.config.request_timeout, config.fetch_max_wait_ms),
                purpose=FETCH,
            )
            results = parse_fetch_response(response, offsets, leader)
        except KafkaError as exc:
            results = dict.fromkeys(offsets, exc)
        finally:
            self._brokers_in_flight.discard(leader)
            for state in states.values():
                state.in_flight = False
            self.wake()
        now = trio.current_time()
        for tp, result in results.items():
            state = states[tp]
            if state.epoch != epochs[tp] or state.fetch_offset != offsets[tp]:
                continue  # sought, reset or revoked meanwhile
            if isinstance(result, KafkaError):
                self._fetch_failed(tp, state, result, now)
            else:
                self._fetched(tp, state, result)

    def _fetched(self, tp: TopicPartition, state: PartitionState, raw: RawBatches) -> None:
        if raw.high_watermark >= 0:
            state.high_watermark = raw.high_watermark
        if raw.log_start_offset >= 0:
            state.log_start_offset = raw.log_start_offset
        if raw.batches and raw.next_offset > state.fetch_offset:
            self._completed.append(CompletedFetch(tp, state, raw, self.config.read_committed))
            state.fetch_offset = raw.next_offset
            state.queued += 1
            self._signal_data()
        elif raw.truncated_bytes:
            message = (
                f"{tp}: the batch at offset {state.fetch_offset} is larger than the fetch allows "
                f"(max_partition_fetch_bytes={self.config.max_partition_fetch_bytes}) and the broker "
                "sent only part of it"
            )
            state.fail(MessageTooLargeError(message, topic=tp.topic, partition=tp.partition))
            self._signal_data()

    def _fetch_failed(self, tp: TopicPartition, state: PartitionState, error: KafkaError, now: float) -> None:
        if isinstance(error, OffsetOutOfRangeError):
            policy = self.config.auto_offset_reset
            if policy == "none":
                state.fail(error)
                self._signal_data()
            else:
                log.info("%s; resetting to the %s offset", error, policy)
                state.request_reset(policy)
            self.wake()
        elif error.retriable or error.invalidates_metadata:
            log.debug("fetch of %s failed, will retry: %s", tp, error)
            self.cluster.note_error(error)
            state.retry_at = now + self.cluster.config.retry_backoff
        else:
            state.fail(error)
            self._signal_data()

    # --- positions -----------------------------------------------------------------------------

    async def _resolve_positions(
        self, states: dict[TopicPartition, PartitionState], epochs: dict[TopicPartition, int]
    ) -> None:
        """Committed offsets for new partitions, else the reset policy (ListOffsets)."""

        def current(tp: TopicPartition) -> bool:
            return states[tp].epoch == epochs[tp] and self.subscriptions.partitions.get(tp) is states[tp]

        try:
            committed: dict[TopicPartition, int | None] = {}
            wanted = [tp for tp, state in states.items() if state.reset is None and current(tp)]
            if self.offsets is not None and wanted:
                committed = await self.offsets.fetch(wanted)
            specs = self._apply_committed({tp: s for tp, s in states.items() if current(tp)}, committed)
            if specs:
                isolation = READ_COMMITTED if self.config.read_committed else READ_UNCOMMITTED
                listed = await Admin(self.cluster).list_offsets(specs, isolation_level=isolation)
                for tp, found in listed.items():
                    if current(tp):
                        states[tp].seek(found.offset)
        except KafkaError as exc:
            if exc.retriable:
                log.warning("looking up positions of %s failed, will retry: %s", list(states), exc)
                await trio.sleep(self.cluster.config.retry_backoff)
            else:
                for tp, state in states.items():
                    if current(tp):
                        state.fail(exc)
                self._signal_data()
        finally:
            for state in states.values():
                state.resolving = False
            self._positions.set()
            self._positions = trio.Event()
            self.wake()

    def _apply_committed(
        self, states: dict[TopicPartition, PartitionState], committed: dict[TopicPartition, int | None]
    ) -> dict[TopicPartition, int]:
        """Seek to committed offsets; the ListOffsets specs of the partitions left to reset."""
        specs: dict[TopicPartition, int] = {}
        for tp, state in states.items():
            offset = committed.get(tp)
            if offset is not None:
                state.seek(offset)
                continue
            strategy = state.reset or self.config.auto_offset_reset
            if strategy != "none":
                specs[tp] = EARLIEST if strategy == "earliest" else LATEST
                continue
            message = f"{tp} has no committed offset and auto_offset_reset is 'none'"
            state.fail(NoOffsetForPartitionError(message, topic=tp.topic, partition=tp.partition))
            self._signal_data()
        return specs

    async def wait_for_positions(self) -> None:
        """Until the next position lookup ends."""
        await self._positions.wait()

    # --- handing out records -----------------------------------------------------------------

    def raise_partition_errors(self) -> None:
        """Raise the first failed partition's error (it stays until the partition is sought)."""
        for state in self.subscriptions.partitions.values():
            if state.error is not None:
                raise state.error

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records, advancing positions past them."""
        out: list[ConsumerRecord] = []
        completed = self._completed
        paused: list[CompletedFetch] = []
        check_crc = self.config.check_crcs
        while completed and len(out) < max_records:
            cf = completed[0]
            if cf.stale:
                completed.popleft()
                continue
            if cf.state.paused:
                paused.append(completed.popleft())
                continue
            if not cf.started:
                cf.started = True
                cf.state.queued -= 1
                self.wake()  # the partition may be fetched again
            if cf.take_into(out, max_records, check_crc):
                completed.popleft()
        if paused:
            completed.extendleft(reversed(paused))
        return out

    def next_record(self) -> ConsumerRecord | None:
        """The next record of the answer being handed out, if it is still current; else None
        (then :meth:`take` with 1 moves on). The per-record path of ``async for``."""
        if not self._completed:
            return None
        cf = self._completed[0]
        state = cf.state
        index = cf.index
        records = cf.records
        if index + 1 >= len(records) or state.epoch != cf.epoch or state.paused or not cf.started:
            return None  # the batch's last record (the position moves past the batch) goes the slow way
        record = records[index]
        cf.index = index + 1
        # The application asked for this record, so it is done with the one before.
        state.processed = state.position
        state.position = record.offset + 1
        return record

    def drop(self, state: PartitionState) -> None:
        """Forget a partition's buffered answers (its epoch has moved on)."""
        self._completed = deque(cf for cf in self._completed if cf.state is not state)


__all__ = ["FETCH", "CompletedFetch", "Fetcher"]
