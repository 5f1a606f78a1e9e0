"""One transactional id's state, and the transitions between states, as Kafka's
TransactionMetadata defines them (KIP-98, with KIP-360's epoch bumps).

Theory of operation
-------------------
A transactional id has a producer id and epoch, a timeout, and one of these states::

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit --markers--> CompleteCommit
                                     \\                                          |
                                      --EndTxn/timeout--> PrepareAbort --markers--> CompleteAbort
    (Complete* --AddPartitions--> Ongoing, Complete*/Empty --InitProducerId--> Empty, epoch + 1)

Every change is first *prepared*: the target is computed and set as the ``pending`` state, which
refuses any other change (CONCURRENT_TRANSACTIONS) while the record of the change is written to
``__transaction_state`` and replicated. Only then is it *completed* (applied), or, if the write
failed, dropped. So the state in memory never runs ahead of what a coordinator taking over would
read back from the log.

A prepared commit or abort is the decision: once its record is written the coordinator has the
partition leaders append the markers (WriteTxnMarkers), and when every partition has one it writes
the Complete record. Fencing (a newer InitProducerId for the id, or the transaction's timeout)
bumps the epoch at once, in memory, and aborts with the bumped epoch, so a zombie's requests
are refused from that moment (PRODUCER_FENCED) and its partitions refuse its data (the marker
carries the new epoch).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: An epoch at or past this starts a new producer id (the coordinator must always be able to fence).
EPOCH_EXHAUSTED = 2**15 - 2

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    """Kafka's states, with their ids in the log and their names in DescribeTransactions."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        for state in cls:
            if state.kafka_name == name:
                return state
        return None


_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

#: The states a transaction is open in (timeouts apply; markers not yet all written).
OPEN = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


class InvalidTransition(Exception):
    """A transition Kafka's state machine does not allow: a bug, never a client's doing."""


@dataclass(frozen=True, slots=True)
class Transit:
    """A prepared change: what the state becomes once its record is written."""

    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    #: An abort that fences the producer (its epoch was bumped for it); not written to the log.
    fence: bool = False


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    #: KIP-360: the epoch before the last bump made at the producer's own request, so that a retry
    #: of that InitProducerId gets the same answer (in memory only, as in Kafka's v0 records).
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: The producer id before a rotation (exhausted epochs), for a retry of that InitProducerId.
    previous_producer_id: int = NO_PRODUCER_ID
    pending: TxnState | None = None
    #: An epoch fence whose record could not be written: the next one does not bump again.
    failed_epoch_fence: bool = False

    @property
    def pending_transition(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED

    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        epoch: int | None = None,
        last_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
        now_ms: int,
    ) -> Transit:
        if self.pending is not None:
            raise InvalidTransition(
                f"{self.transactional_id}: {state.kafka_name} while {self.pending.kafka_name} is pending"
            )
        if self.state not in _VALID_PREVIOUS[state]:
            raise InvalidTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        self.pending = state
        return Transit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if epoch is None else epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            last_update_ms=now_ms,
        )

    # --- the preparations ----------------------------------------------------------------------

    def prepare_epoch_bump(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> Transit | None:
        """InitProducerId on an idle id: the next epoch (None: the expected epoch is a fenced one)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer was lost: the same answer again.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            TxnState.EMPTY,
            epoch=epoch,
            last_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now_ms=now_ms,
        )

    def prepare_producer_id_rotation(self, producer_id: int, timeout_ms: int, remember: bool, now_ms: int) -> Transit:
        """InitProducerId on an id whose epochs are exhausted: a new producer id at epoch 0."""
        return self._prepare(
            TxnState.EMPTY,
            producer_id=producer_id,
            epoch=0,
            last_epoch=self.producer_epoch if remember else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now_ms=now_ms,
        )

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> Transit:
        start = now_ms if self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) else None
        return self._prepare(
            TxnState.ONGOING, partitions=frozenset(self.partitions | added), start_ms=start, now_ms=now_ms
        )

    def prepare_end(self, commit: bool, now_ms: int) -> Transit:
        return self._prepare(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms=now_ms)

    def prepare_fence_and_abort(self, now_ms: int) -> Transit:
        """Fence the producer (epoch + 1, at once) and abort its open transaction with that epoch:
        a timed-out transaction, or an InitProducerId for an id whose transaction is open."""
        if not self.failed_epoch_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        return replace(self._prepare(TxnState.PREPARE_ABORT, now_ms=now_ms), fence=True)

    def prepare_complete(self, now_ms: int) -> Transit:
        """Every marker is written (the partitions were removed one by one as they were)."""
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._prepare(state, partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self, now_ms: int) -> Transit:
        return self._prepare(TxnState.DEAD, partitions=frozenset(), now_ms=now_ms)

    # --- applying ---------------------------------------------------------------------------------

    def complete(self, transit: Transit) -> None:
        """The record of ``transit`` is written: the state becomes it."""
        if self.pending is not transit.state:
            raise InvalidTransition(f"{self.transactional_id}: completing {transit.state} while {self.pending} pending")
        if transit.producer_id != self.producer_id:
            self.previous_producer_id = self.producer_id
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.pending = None
        if transit.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            self.failed_epoch_fence = False

    def abandon(self, transit: Transit) -> None:
        """The record of ``transit`` could not be written: nothing changes (but a fence's epoch,
        which stays bumped in memory and is not bumped again: it was never handed out)."""
        if transit.fence:
            self.failed_epoch_fence = True
        self.pending = None

    def transit_of_current(self) -> Transit:
        """The current state as a record (what loading read, or what a prepared change replays)."""
        return Transit(
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
        )
