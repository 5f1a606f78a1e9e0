"""What the state machine's parts share during one call: the clock, the timers,
the effects produced so far, and the writes whose outcome is still awaited.

Every public call of the coordinator starts with :meth:`Runtime.begin` (the
current time) and ends with :meth:`Runtime.take` (the effects it produced).
A write carries an optional continuation, run when the driver reports the
write's outcome: that is how a commit's reply, or a leader's assignment,
waits for its record to be in the log, as in Kafka.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence

from tributary.broker.group.config import GroupConfig
from tributary.broker.group.member import Ticket
from tributary.broker.group.messages import (
    CommitResult,
    ConsumerHeartbeatResult,
    Effect,
    JoinResult,
    Reply,
    SyncResult,
    Write,
)
from tributary.broker.group.timers import TimerQueue
from tributary.protocol.error_codes import ErrorCode

#: Called with the write's error code (NONE when it is in the log).
Continuation = Callable[[ErrorCode], None]


def _random_suffix() -> str:
    return str(uuid.uuid4())


class Runtime:
    def __init__(self, config: GroupConfig, new_id_suffix: Callable[[], str] = _random_suffix) -> None:
        self.config = config
        self.timers = TimerQueue()
        self.now_ms = 0
        self._new_id_suffix = new_id_suffix
        self._effects: list[Effect] = []
        self._write_ids = itertools.count(1)
        self._continuations: dict[int, Continuation | None] = {}

    def begin(self, now_ms: int) -> None:
        # The clock never runs backwards inside the state machine, whatever the wall clock does.
        self.now_ms = max(self.now_ms, now_ms)

    def take(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects

    def reply(self, ticket: Ticket, result: JoinResult | SyncResult | CommitResult | ConsumerHeartbeatResult) -> None:
        self._effects.append(Reply(ticket, result))

    def write(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        then: Continuation | None = None,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        write_id = next(self._write_ids)
        self._continuations[write_id] = then
        self._effects.append(Write(write_id, partition, tuple(records), producer))

    def complete_write(self, write_id: int, error: ErrorCode) -> None:
        then = self._continuations.pop(write_id, None)
        if then is not None:
            then(error)

    @property
    def writes_in_flight(self) -> int:
        return len(self._continuations)

    def new_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's member id: the instance id (static) or client id, a dash and a UUID."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{self._new_id_suffix()}"


def group_store_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of group metadata tells the members (Kafka's mapping)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def consumer_store_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of a consumer group's records tells the member (Kafka's
    GroupCoordinatorService.handleOperationException)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def offset_store_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of committed offsets tells the committer (Kafka's mapping)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error
