"""Replica fetchers: a follower copies its leader's log, batch for batch, byte for byte.

One fetcher per leader broker (Kafka's ReplicaFetcherThread), for every partition this broker
follows from it. A round is:

1. Partitions that just became followers (``needs_truncation``) ask the leader, with
   OffsetForLeaderEpoch, where its log ends for the follower's latest epoch, and cut their own
   log there (KIP-101/279): whatever a follower or a returning old leader holds past that point
   was never committed and is not in the new leader's log.
2. One Fetch with ``replica_id`` = this broker, each partition at its log end offset and with its
   current leader epoch. The leader answers up to its log end (not only to the high watermark)
   and learns each follower's log end from the fetch offset.
3. The batches are appended as they came (offsets, epochs, compression untouched), the
   follower's high watermark becomes min(leader's high watermark, own log end), and its log
   start offset the leader's (as far as its own log reaches): what DeleteRecords or retention
   removed on the leader goes here too.

A partition the leader refuses (it moved, the epoch is fenced, it does not know it yet) waits for
the next snapshot or a backoff; connection failures back off and reconnect. Nothing here decides
leadership: the replica manager starts and stops fetchers as the snapshot changes.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.log.errors import LogClosedError, LogError, StorageError
from tributary.broker.partitions import Partition
from tributary.broker.replication.channel import BrokerChannel, ChannelError
from tributary.broker.replication.config import ReplicationConfig
from tributary.broker.security.config import InterBrokerClient
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

log = logging.getLogger(__name__)

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
UNDEFINED_EPOCH = -1
#: Errors after which a partition waits for a newer snapshot: the leader has moved on.
_STALE_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH}
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def truncation_point(
    leader_epoch: int,
    leader_end: int,
    local_end_for: Callable[[int], tuple[int, int]],
    log_end: int,
    high_watermark: int,
) -> int:
    """Where a follower cuts its log, given the leader's answer to OffsetForLeaderEpoch (KIP-279).

    The leader answered (epoch, end offset) for the follower's latest epoch: the largest epoch it
    knows that is not larger, and where that epoch ends in its log. If the leader does not know
    the follower's epoch at all (UNDEFINED), the follower falls back to its high watermark, the
    point every replica agreed on. Otherwise the logs agree up to the end of that epoch in both,
    so the cut is at the smaller of the two ends (and never past the follower's own log end).
    """
    if leader_epoch == UNDEFINED_EPOCH or leader_end < 0:
        return min(high_watermark, log_end)
    local_epoch, local_end = local_end_for(leader_epoch)
    target = leader_end
    if local_epoch == leader_epoch and local_end >= 0:
        target = min(target, local_end)
    return min(target, log_end)


class Fetcher:
    """Copies every partition this broker follows from one leader."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        config: ReplicationConfig,
        *,
        snapshot: Callable[[], ClusterSnapshot],
        followed: Callable[[int], Sequence[Partition]],
        on_progress: Callable[[], None] | None = None,
        security: InterBrokerClient | None = None,
    ) -> None:
        self.broker_id = broker_id
        #: How to reach and log in to the leader (inter.broker.listener.name); None: plain text.
        self._security = security
        self.leader_id = leader_id
        self._config = config
        self._snapshot = snapshot
        self._followed = followed
        self._on_progress = on_progress
        #: (topic, partition) -> (snapshot version, time) at which the leader refused it: retried
        #: with a newer snapshot, or after replica.fetch.backoff.ms (the leader may simply not
        #: have heard of a new topic yet, and nothing else may change for a long time).
        self._stalled: dict[tuple[str, int], tuple[int, float]] = {}

    async def run(self) -> None:
        backoff = self._config.fetch_backoff_ms / 1000
        while True:
            broker = self._snapshot().brokers.get(self.leader_id)
            if broker is None:
                await trio.sleep(backoff)
                continue
            try:
                channel = await BrokerChannel.connect(
                    broker,
                    f"tributary-replica-fetcher-{self.broker_id}",
                    max_frame_size=self._config.fetch_response_max_bytes * 2 + 1024 * 1024,
                    security=self._security,
                )
            except ChannelError as exc:
                log.info("fetcher %d -> %d: %s", self.broker_id, self.leader_id, exc)
                await trio.sleep(backoff)
                continue
            try:
                while True:
                    if not await self._round(channel):
                        await trio.sleep(backoff)
            except ChannelError as exc:
                log.info("fetcher %d -> %d: connection lost: %s", self.broker_id, self.leader_id, exc)
                await trio.sleep(backoff)
            finally:
                await channel.aclose()

    def _active(self) -> list[Partition]:
        version = self._snapshot().version
        retry_before = trio.current_time() - self._config.fetch_backoff_ms / 1000
        active = []
        for partition in self._followed(self.leader_id):
            key = (partition.topic, partition.index)
            stalled = self._stalled.get(key)
            if stalled is not None and stalled[0] == version and stalled[1] > retry_before:
                continue
            self._stalled.pop(key, None)
            if not partition.log.closed:
                active.append(partition)
        return active

    def _stall(self, partition: Partition, why: str) -> None:
        log.info(
            "fetcher %d -> %d: %s-%d: %s; retrying with new metadata or after the backoff",
            self.broker_id, self.leader_id, partition.topic, partition.index, why,
        )  # fmt: skip
        self._stalled[partition.topic, partition.index] = (self._snapshot().version, trio.current_time())

    async def _round(self, channel: BrokerChannel) -> bool:
        """One truncation step and one fetch; False when there was nothing to do (back off)."""
        partitions = self._active()
        if not partitions:
            return False
        truncating = [p for p in partitions if p.needs_truncation]
        if truncating:
            await self._truncate(channel, truncating)
        fetching = [p for p in partitions if not p.needs_truncation and not p.is_leader]
        if not fetching:
            return bool(truncating)
        return await self._fetch(channel, fetching)

    async def _truncate(self, channel: BrokerChannel, partitions: list[Partition]) -> None:
        by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        asked: dict[tuple[str, int], tuple[Partition, int]] = {}
        for p in partitions:
            latest = p.log.latest_epoch
            epoch = UNDEFINED_EPOCH if latest is None else latest
            by_topic.setdefault(p.topic, []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=p.index, current_leader_epoch=p.leader_epoch, leader_epoch=epoch
                )
            )
            asked[p.topic, p.index] = (p, p.leader_epoch)
        request = OffsetForLeaderEpochRequest(
            replica_id=self.broker_id,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )
        response: OffsetForLeaderEpochResponse = await channel.request(
            request, OFFSET_FOR_LEADER_EPOCH_VERSION, self._config.socket_timeout_ms / 1000
        )
        for topic in response.topics:
            for answer in topic.partitions:
                found = asked.get((topic.topic, answer.partition))
                if found is None:
                    continue
                p, epoch = found
                if p.leader_epoch != epoch or not p.needs_truncation or p.log.closed:
                    continue  # the role changed while we asked
                if answer.error_code:
                    code = ErrorCode(answer.error_code)
                    if code in _STALE_ERRORS or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        self._stall(p, f"OffsetForLeaderEpoch answered {code.name}")
                    continue
                self._truncate_one(p, answer.leader_epoch, answer.end_offset)

    def _truncate_one(self, p: Partition, leader_epoch: int, leader_end: int) -> None:
        plog = p.log
        before = plog.log_end_offset
        target = truncation_point(leader_epoch, leader_end, plog.end_offset_for_epoch, before, plog.high_watermark)
        if target < before:
            try:
                plog.truncate_to(target)
            except ValueError:
                # Not a batch boundary here: the logs diverged inside a batch, which only the
                # high watermark (always a boundary) is sure to be below.
                target = min(plog.high_watermark, target)
                plog.truncate_to(target)
            log.warning(
                "%s-%d: truncated from %d to %d to match leader %d (epoch %d)",
                p.topic, p.index, before, plog.log_end_offset, self.leader_id, p.leader_epoch,
            )  # fmt: skip
        p.needs_truncation = False

    async def _fetch(self, channel: BrokerChannel, partitions: list[Partition]) -> bool:
        config = self._config
        by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
        sent: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        for p in partitions:
            plog = p.log
            by_topic.setdefault(p.topic, []).append(
                FetchRequest.FetchPartition(
                    partition=p.index,
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=plog.log_end_offset,
                    log_start_offset=plog.log_start_offset,
                    partition_max_bytes=config.fetch_max_bytes,
                )
            )
            sent[p.topic, p.index] = (p, p.leader_epoch, plog.log_end_offset)
        request = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=config.fetch_wait_max_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_response_max_bytes,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        timeout = (config.socket_timeout_ms + config.fetch_wait_max_ms) / 1000
        response: FetchResponse = await channel.request(request, FETCH_VERSION, timeout)
        if response.error_code:
            log.info("fetcher %d -> %d: fetch failed: %s", self.broker_id, self.leader_id,
                     ErrorCode(response.error_code).name)  # fmt: skip
            return False
        appended: list[Partition] = []
        for topic in response.responses:
            for data in topic.partitions:
                found = sent.get((topic.topic, data.partition_index))
                if found is None:
                    continue
                p, epoch, offset = found
                if p.leader_epoch != epoch or p.is_leader or p.log.closed or p.log.log_end_offset != offset:
                    continue  # the role or the log changed while the fetch was out
                if self._apply(p, data):
                    appended.append(p)
        if config.high_watermark_fsync:
            # The next fetch offset tells the leader "I hold everything below": under
            # high.watermark.fsync that must mean "on disk", so fsync first (once per
            # partition per fetch, however many batches it brought).
            for p in appended:
                with contextlib.suppress(StorageError, LogClosedError):
                    await trio.to_thread.run_sync(p.log.flush)
        progressed = bool(appended)
        if progressed and self._on_progress is not None:
            self._on_progress()
        return True

    def _apply(self, p: Partition, data: FetchResponse.PartitionData) -> bool:
        code = ErrorCode(data.error_code)
        if code in _STALE_ERRORS or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            self._stall(p, f"fetch answered {code.name}")
            return False
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Past the leader's end: reconcile again. Below its start: the leader deleted what we
            # lack (retention), so start over at its log start.
            if data.log_start_offset > p.log.log_end_offset:
                self._restart_at(p, data.log_start_offset)
            else:
                p.needs_truncation = True
            return False
        if code:
            log.info("fetcher %d -> %d: %s-%d: %s", self.broker_id, self.leader_id, p.topic, p.index, code.name)
            return False
        plog = p.log
        records = data.records
        appended = False
        if records:
            try:
                plog.append_as_follower(records, _now_ms())
            except (LogError, ProtocolError, ValueError) as exc:
                self._stall(p, f"cannot append what the leader sent: {exc}")
                return False
            appended = True
            p.notify_appended()
        # What the leader no longer serves (DeleteRecords, retention), this replica drops too.
        plog.follow_log_start_offset(data.log_start_offset)
        high_watermark = min(data.high_watermark, plog.log_end_offset)
        if high_watermark > plog.high_watermark:
            plog.high_watermark = high_watermark
            p.notify_appended()
        return appended

    def _restart_at(self, p: Partition, offset: int) -> None:
        log.warning(
            "%s-%d: the leader's log starts at %d, past this replica's end %d: starting over there",
            p.topic, p.index, offset, p.log.log_end_offset,
        )  # fmt: skip
        p.log.truncate_fully_and_start_at(offset)
