"""Drives the sans-IO group coordinator with a fake clock and an in-memory log."""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from typing import Any

from tributary.broker.group.config import GroupConfig
from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.messages import (
    CommitRequest,
    CommitResult,
    Effect,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    Loaded,
    Reply,
    SyncRequest,
    SyncResult,
    TxnCommitRequest,
    TxnEnd,
    TxnRecord,
    Write,
)
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.protocol.error_codes import ErrorCode

CONFIG = GroupConfig(
    initial_rebalance_delay_ms=3000,
    min_session_timeout_ms=1000,
    max_session_timeout_ms=60_000,
    offsets_topic_partitions=4,
    offsets_retention_minutes=60,
    offsets_retention_check_interval_ms=60_000,
)
SESSION = 10_000
REBALANCE = 30_000
RANGE = (("range", b"range-meta"),)


class Harness:
    def __init__(self, config: GroupConfig = CONFIG, *, load: bool = True) -> None:
        self.now = 1_000_000
        suffixes = itertools.count(1)
        self.coordinator = GroupCoordinator(config, new_id_suffix=lambda: str(next(suffixes)))
        #: partition -> the records written, in order (the "log").
        self.log: dict[int, list[Loaded]] = defaultdict(list)
        self.replies: dict[int, Any] = {}
        #: When set, writes fail with this code.
        self.write_error: ErrorCode | None = None
        #: When true, writes wait in ``held`` until :meth:`release_writes`.
        self.hold_writes = False
        self.held: list[Write] = []
        self._tickets = itertools.count(1)
        if load:
            for partition in range(config.offsets_topic_partitions):
                self.load(partition)

    # --- plumbing ---------------------------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        queue = deque(effects)
        while queue:
            effect = queue.popleft()
            if isinstance(effect, Reply):
                assert effect.ticket not in self.replies, f"ticket {effect.ticket} answered twice"
                self.replies[effect.ticket] = effect.result
            elif self.hold_writes:
                self.held.append(effect)
            else:
                queue.extend(self._complete(effect))

    def _complete(self, write: Write) -> list[Effect]:
        error = self.write_error or ErrorCode.NONE
        if error == ErrorCode.NONE and write.producer is not None:
            self.log[write.partition].extend(TxnRecord(write.producer[0], k, v) for k, v in write.records)
        elif error == ErrorCode.NONE:
            self.log[write.partition].extend(write.records)
        return self.coordinator.write_completed(self.now, write.write_id, error)

    def release_writes(self) -> None:
        held, self.held = self.held, []
        self.hold_writes = False
        for write in held:
            self.apply(self._complete(write))

    def advance(self, ms: int) -> None:
        """Moves the clock on, firing timers at their own deadlines along the way."""
        end = self.now + ms
        while (deadline := self.coordinator.next_deadline()) is not None and deadline <= end:
            self.now = max(self.now, deadline)
            self.apply(self.coordinator.advance(self.now))
        self.now = end

    def load(self, partition: int) -> None:
        token = self.coordinator.begin_loading(partition)
        self.apply(self.coordinator.finish_loading(self.now, partition, token, list(self.log[partition])))

    def pending(self, ticket: int) -> bool:
        return ticket not in self.replies

    # --- requests ---------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        protocols: tuple[tuple[str, bytes], ...] = RANGE,
        session: int = SESSION,
        rebalance: int = REBALANCE,
        instance: str | None = None,
        require_known: bool = True,
        client_id: str = "client",
        protocol_type: str = "consumer",
    ) -> int:
        ticket = next(self._tickets)
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            require_known_member_id=require_known,
            client_id=client_id,
            client_host="/127.0.0.1",
        )
        self.apply(self.coordinator.join(self.now, ticket, req))
        return ticket

    def join_result(self, ticket: int) -> JoinResult:
        result = self.replies[ticket]
        assert isinstance(result, JoinResult)
        return result

    def two_joined(self) -> tuple[str, str, int]:
        """Two members joined together and the first generation formed (after the initial
        rebalance delay, twice over): (leader, follower, generation), neither synced yet."""
        a, b = self.new_member(), self.new_member()
        ta, _tb = self.join(a), self.join(b)
        self.advance(2 * self.coordinator.config.initial_rebalance_delay_ms)
        return a, b, self.join_result(ta).generation_id

    def new_member(self, **kwargs: Any) -> str:
        """The MEMBER_ID_REQUIRED round trip: the member id to join with."""
        result = self.join_result(self.join(**kwargs))
        assert result.error == ErrorCode.MEMBER_ID_REQUIRED, result
        return result.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> int:
        ticket = next(self._tickets)
        req = SyncRequest(group, generation, member_id, instance, assignments or {})
        self.apply(self.coordinator.sync(self.now, ticket, req))
        return ticket

    def sync_result(self, ticket: int) -> SyncResult:
        result = self.replies[ticket]
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None) -> ErrorCode:
        error, effects = self.coordinator.heartbeat(self.now, group, generation, member_id, instance)
        self.apply(effects)
        return error

    def leave(self, *members: str | tuple[str, str | None], group: str = "g") -> LeaveResult:
        leaving = [LeavingMember(*m) if isinstance(m, tuple) else LeavingMember(m, None) for m in members]
        result, effects = self.coordinator.leave(self.now, group, leaving)
        self.apply(effects)
        return result

    def commit(
        self,
        offsets: dict[tuple[str, int], int | OffsetAndMetadata],
        *,
        group: str = "g",
        member_id: str = "",
        generation: int = -1,
        instance: str | None = None,
        retention_ms: int = -1,
    ) -> int:
        ticket = next(self._tickets)
        values = {tp: v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v) for tp, v in offsets.items()}
        req = CommitRequest(group, member_id, instance, generation, values, retention_ms=retention_ms)
        self.apply(self.coordinator.commit(self.now, ticket, req))
        return ticket

    def txn_commit(
        self,
        offsets: dict[tuple[str, int], int],
        producer_id: int,
        *,
        epoch: int = 0,
        group: str = "g",
        member_id: str = "",
        generation: int = -1,
    ) -> int:
        ticket = next(self._tickets)
        values = {tp: OffsetAndMetadata(v) for tp, v in offsets.items()}
        req = TxnCommitRequest(group, producer_id, epoch, member_id, None, generation, values)
        self.apply(self.coordinator.txn_commit(self.now, ticket, req))
        return ticket

    def mark(self, producer_id: int, commit: bool, group: str = "g") -> None:
        """The transaction's marker reaches the group's partition (WriteTxnMarkers)."""
        partition = self.coordinator.partition_for(group)
        self.log[partition].append(TxnEnd(producer_id, commit))
        self.apply(self.coordinator.complete_txn(self.now, partition, producer_id, commit))

    def commit_errors(self, ticket: int) -> dict[tuple[str, int], ErrorCode]:
        result = self.replies[ticket]
        assert isinstance(result, CommitResult)
        return result.errors

    def committed(self, tp: tuple[str, int], group: str = "g") -> int | None:
        result = self.coordinator.fetch_offsets(group, [tp])
        assert result.error == ErrorCode.NONE, result
        value = result.offsets[tp]
        return None if value is None else value.offset

    # --- whole flows -----------------------------------------------------------------------

    def form_group(self, count: int, **kwargs: Any) -> tuple[list[str], int]:
        """``count`` dynamic members join an empty group and sync; returns (member ids in
        join order, generation). Each member's assignment is ``b"a-<member id>"``."""
        ids = [self.new_member(**kwargs) for _ in range(count)]
        tickets = [self.join(member_id, **kwargs) for member_id in ids]
        self.advance(CONFIG.initial_rebalance_delay_ms * count + 1)
        results = [self.join_result(t) for t in tickets]
        assert all(r.error == ErrorCode.NONE for r in results), results
        generation = results[0].generation_id
        leader = results[0].leader
        group = kwargs.get("group", "g")
        syncs = [
            self.sync(m, generation, {x: b"a-" + x.encode() for x in ids} if m == leader else None, group=group)
            for m in ids
        ]
        assert all(self.sync_result(t).error == ErrorCode.NONE for t in syncs)
        return ids, generation
