"""The transaction coordinator of one broker, as a sans-IO state machine.

It coordinates the transactional ids whose ``__transaction_state`` partition this broker leads,
as :mod:`broker.group.coordinator` does for groups. Inputs are method calls carrying the current
time (milliseconds) and, for requests answered after a write, a ticket; outputs are results and
:mod:`effects <.messages>`. Nothing here sleeps, reads a clock or touches a file: tests drive it
with a fake clock (``tests/broker/txn``), :mod:`.service` with trio.

Ownership follows the cluster: :meth:`begin_loading` when this broker becomes a partition's
leader, with that leader epoch as the *coordinator epoch* stamped on every marker it has written
(a deposed coordinator's markers are then refused by the partitions: TRANSACTION_COORDINATOR_FENCED);
:meth:`finish_loading` with the partition's records, which resumes the markers of transactions
decided but not completed; :meth:`unload` when the leadership goes. Requests for ids of a
partition being loaded get COORDINATOR_LOAD_IN_PROGRESS; of a partition not led here, NOT_COORDINATOR.

Each state change is prepared (:mod:`.state`), written, and applied only once the write is in
the in-sync replicas: :meth:`write_completed` checks that the partition is still loaded in the
same coordinator epoch before it applies anything, else the caller gets NOT_COORDINATOR.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from tributary.broker.txn.config import TxnConfig
from tributary.broker.txn.messages import (
    NEED_PRODUCER_ID,
    AddPartitionsRequest,
    Effect,
    EndRequest,
    InitRequest,
    InitResult,
    ListedTxn,
    NeedProducerId,
    Reply,
    SendMarkers,
    Ticket,
    TopicPartition,
    TxnDescription,
    Write,
)
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC, partition_for
from tributary.broker.txn.records import (
    RecordFormatError,
    StoredTxn,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tributary.broker.txn.state import NO_PRODUCER_EPOCH, OPEN, Transit, TxnMetadata, TxnState
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

#: Called with the write's error code, already mapped to what a client is told (NONE: applied).
Continuation = Callable[[ErrorCode], None]

ABORT_TIMED_OUT = "abort-timed-out"
REMOVE_EXPIRED = "remove-expired"
RETRY_COMPLETE = "retry-complete"
PARKED = "parked"
#: How long an AddPartitionsToTxn waits for the id's last transaction to complete before it is
#: answered CONCURRENT_TRANSACTIONS (see TransactionCoordinator.add_partitions).
PARK_MS = 500
#: How soon a Complete record that could not be written is tried again.
RETRY_COMPLETE_MS = 1000


def write_error(error: ErrorCode) -> ErrorCode:
    """What a failed write to ``__transaction_state`` tells the client (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


@dataclass(slots=True)
class _Owned:
    coordinator_epoch: int
    token: int
    loaded: bool = False


@dataclass(slots=True)
class _PendingWrite:
    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: Transit
    then: Continuation | None


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.partition_count = config.state_log_partitions
        self.txns: dict[str, TxnMetadata] = {}
        self.now_ms = 0
        self._owned: dict[int, _Owned] = {}
        self._tokens = itertools.count(1)
        self._write_ids = itertools.count(1)
        self._writes: dict[int, _PendingWrite] = {}
        self._effects: list[Effect] = []
        self._deadlines: dict[str, int] = {}
        # Transactions whose markers are all written but whose Complete record was not.
        self._complete_retries: set[str] = set()
        # AddPartitionsToTxn requests waiting for their id's last transaction to complete:
        # id -> (ticket, request, until when).
        self._parked: dict[str, list[tuple[Ticket, AddPartitionsRequest, int]]] = {}

    # --- where transactional ids live ----------------------------------------------------------

    def set_partition_count(self, count: int) -> None:
        """The actual partition count of ``__transaction_state``."""
        self.partition_count = count

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def coordinator_epoch(self, partition: int) -> int | None:
        owned = self._owned.get(partition)
        return None if owned is None else owned.coordinator_epoch

    def _status(self, transactional_id: str) -> tuple[ErrorCode | None, int]:
        """(error, coordinator epoch): whether this broker serves the id now."""
        owned = self._owned.get(self.partition_for(transactional_id))
        if owned is None:
            return ErrorCode.NOT_COORDINATOR, -1
        if not owned.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, owned.coordinator_epoch
        return None, owned.coordinator_epoch

    def _begin(self, now_ms: int) -> None:
        # The clock never runs backwards inside the state machine, whatever the wall clock does.
        self.now_ms = max(self.now_ms, now_ms)

    def _take(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects

    def _reply(self, ticket: Ticket | None, result: InitResult | ErrorCode) -> None:
        if ticket is not None:
            self._effects.append(Reply(ticket, result))

    # --- loading --------------------------------------------------------------------------------

    def begin_loading(self, partition: int, coordinator_epoch: int) -> int:
        """This broker now leads ``partition`` in ``coordinator_epoch``: refuse its ids until
        loaded. Returns the token :meth:`finish_loading` must present."""
        self._drop_partition(partition)
        token = next(self._tokens)
        self._owned[partition] = _Owned(coordinator_epoch, token)
        return token

    def finish_loading(
        self, now_ms: int, partition: int, token: int, records: Iterable[tuple[bytes, bytes | None]]
    ) -> list[Effect]:
        """Rebuild the partition's transactions from its records (the last value of each id
        wins), and resume the markers of those decided but not completed."""
        self._begin(now_ms)
        owned = self._owned.get(partition)
        if owned is None or owned.token != token or owned.loaded:
            return self._take()
        stored: dict[str, StoredTxn | None] = {}
        skipped = 0
        for key, value in records:
            try:
                stored[decode_key(key)] = decode_value(value) if value is not None else None
            except RecordFormatError as exc:
                skipped += 1
                log.warning("%s-%d: skipping a record: %s", TRANSACTION_STATE_TOPIC, partition, exc)
        for transactional_id, txn in sorted(stored.items()):
            if txn is None or txn.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
                continue
            self.txns[transactional_id] = TxnMetadata(
                transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.timeout_ms,
                txn.state,
                set(txn.partitions),
                txn.start_ms,
                txn.last_update_ms,
            )
        owned.loaded = True
        for transactional_id, metadata in sorted(self.txns.items()):
            if self.partition_for(transactional_id) != partition:
                continue
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._send_markers(metadata, owned.coordinator_epoch)
        self._schedule(ABORT_TIMED_OUT, self.config.abort_timed_out_interval_ms, keep=True)
        self._schedule(REMOVE_EXPIRED, self.config.remove_expired_interval_ms, keep=True)
        loaded = sum(1 for t in self.txns if self.partition_for(t) == partition)
        log.info(
            "%s-%d loaded in coordinator epoch %d: %d transactional ids (%d unreadable records)",
            TRANSACTION_STATE_TOPIC, partition, owned.coordinator_epoch, loaded, skipped,
        )  # fmt: skip
        return self._take()

    def unload(self, now_ms: int, partition: int) -> list[Effect]:
        """The leadership of ``partition`` went: forget its ids (writes in flight will find it gone)."""
        self._begin(now_ms)
        if self._drop_partition(partition):
            log.info("%s-%d unloaded", TRANSACTION_STATE_TOPIC, partition)
        return self._take()

    def _drop_partition(self, partition: int) -> bool:
        if self._owned.pop(partition, None) is None:
            return False
        for transactional_id in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[transactional_id]
            self._complete_retries.discard(transactional_id)
        for transactional_id in [t for t in self._parked if self.partition_for(t) == partition]:
            for ticket, _, _ in self._parked.pop(transactional_id):
                self._reply(ticket, ErrorCode.NOT_COORDINATOR)
        self._schedule_parked()
        return True

    # --- InitProducerId ---------------------------------------------------------------------------

    def init_producer_id(
        self, now_ms: int, ticket: Ticket, req: InitRequest, fresh_producer_id: int | None = None
    ) -> list[Effect] | NeedProducerId:
        """InitProducerId for a transactional id. Returns :data:`NEED_PRODUCER_ID` when a new
        producer id is needed and ``fresh_producer_id`` is None: call again with one."""
        self._begin(now_ms)
        transactional_id = req.transactional_id
        error: ErrorCode | None = None
        coordinator_epoch = -1
        if not transactional_id:
            error = ErrorCode.INVALID_REQUEST
        elif not 0 < req.timeout_ms <= self.config.max_timeout_ms:
            error = ErrorCode.INVALID_TRANSACTION_TIMEOUT
        else:
            error, coordinator_epoch = self._status(transactional_id)
        if error is not None:
            self._reply(ticket, InitResult(error))
            return self._take()
        txn = self.txns.get(transactional_id)
        if txn is None:
            if fresh_producer_id is None:
                return NEED_PRODUCER_ID
            txn = TxnMetadata(transactional_id, fresh_producer_id, NO_PRODUCER_EPOCH, req.timeout_ms, TxnState.EMPTY)
            txn.last_update_ms = now_ms
            self.txns[transactional_id] = txn
            fresh_producer_id = None
        if txn.pending_transition or txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._reply(ticket, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        elif req.expected is not None and not _valid_expected(txn, *req.expected):
            self._reply(ticket, InitResult(ErrorCode.PRODUCER_FENCED))
        elif txn.state is TxnState.ONGOING:
            # Abort the open transaction first, fencing its producer; the client retries
            # (CONCURRENT_TRANSACTIONS) and then gets the next epoch.
            self._fence_and_abort(txn, coordinator_epoch, ticket)
        elif self._bump(txn, coordinator_epoch, ticket, req, fresh_producer_id) is NEED_PRODUCER_ID:
            return NEED_PRODUCER_ID
        return self._take()

    def _bump(
        self, txn: TxnMetadata, coordinator_epoch: int, ticket: Ticket, req: InitRequest, fresh_producer_id: int | None
    ) -> NeedProducerId | None:
        """The next epoch for an idle id (or a new producer id once its epochs are exhausted)."""
        expected = req.expected
        transit: Transit | None
        if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            if fresh_producer_id is None:
                return NEED_PRODUCER_ID
            remember = expected is not None
            transit = txn.prepare_producer_id_rotation(fresh_producer_id, req.timeout_ms, remember, self.now_ms)
        else:
            transit = txn.prepare_epoch_bump(req.timeout_ms, None if expected is None else expected[1], self.now_ms)
        if transit is None:
            self._reply(ticket, InitResult(ErrorCode.PRODUCER_FENCED))
            return None
        done = transit

        def initialized(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                log.info(
                    "initialized transactional id %s: producer id %d, epoch %d",
                    txn.transactional_id, done.producer_id, done.producer_epoch,
                )  # fmt: skip
                self._reply(ticket, InitResult(ErrorCode.NONE, done.producer_id, done.producer_epoch))
            else:
                self._reply(ticket, InitResult(error))

        self._write(txn, coordinator_epoch, transit, initialized)
        return None

    # --- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------------

    def add_partitions(self, now_ms: int, ticket: Ticket, req: AddPartitionsRequest) -> list[Effect]:
        """AddPartitionsToTxn, and AddOffsetsToTxn (the group's ``__consumer_offsets`` partition).

        The next transaction's first AddPartitionsToTxn usually arrives while the markers of the
        last are still being written. Kafka answers CONCURRENT_TRANSACTIONS and the client retries
        after a backoff (20 ms in librdkafka and the Java client), which then dominates the cost of
        small transactions; here the request waits instead, up to :data:`PARK_MS`, and goes on as
        soon as the last transaction is complete (the answer a retry would get, sooner)."""
        self._begin(now_ms)
        self._add_partitions(ticket, req, park=True)
        return self._take()

    def _add_partitions(self, ticket: Ticket, req: AddPartitionsRequest, *, park: bool) -> None:
        error, coordinator_epoch = self._check_producer(req.transactional_id, req.producer_id, req.producer_epoch)
        txn = self.txns.get(req.transactional_id)
        if error is None and txn is not None:
            added = set(req.partitions)
            if txn.pending_transition or txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                if park:
                    self._parked.setdefault(req.transactional_id, []).append((ticket, req, self.now_ms + PARK_MS))
                    self._schedule(PARKED, PARK_MS, keep=True)
                    return
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            elif txn.state is TxnState.ONGOING and added <= txn.partitions:
                error = ErrorCode.NONE  # already there: nothing to write
            else:
                transit = txn.prepare_add_partitions(added, self.now_ms)
                self._write(txn, coordinator_epoch, transit, lambda e: self._reply(ticket, e))
                return
        self._reply(ticket, error if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR)

    def _unpark(self, transactional_id: str) -> None:
        """The id's state changed: its waiting AddPartitionsToTxn requests go on (or wait again)."""
        for ticket, req, deadline in self._parked.pop(transactional_id, []):
            self._add_partitions(ticket, req, park=deadline > self.now_ms)
        self._schedule_parked()

    def _expire_parked(self) -> None:
        for transactional_id, parked in list(self._parked.items()):
            due = [p for p in parked if p[2] <= self.now_ms]
            if not due:
                continue
            self._parked[transactional_id] = [p for p in parked if p[2] > self.now_ms]
            if not self._parked[transactional_id]:
                del self._parked[transactional_id]
            for ticket, _, _ in due:
                self._reply(ticket, ErrorCode.CONCURRENT_TRANSACTIONS)
        self._schedule_parked()

    def _schedule_parked(self) -> None:
        deadlines = [p[2] for parked in self._parked.values() for p in parked]
        if deadlines:
            self._deadlines[PARKED] = min(deadlines)
        else:
            self._deadlines.pop(PARKED, None)

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode | None, int]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1
        error, coordinator_epoch = self._status(transactional_id)
        if error is not None:
            return error, coordinator_epoch
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, coordinator_epoch
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, coordinator_epoch
        return None, coordinator_epoch

    # --- EndTxn -----------------------------------------------------------------------------------

    def end_txn(self, now_ms: int, ticket: Ticket, req: EndRequest) -> list[Effect]:
        self._begin(now_ms)
        commit = req.commit
        error, coordinator_epoch = self._check_producer(req.transactional_id, req.producer_id, req.producer_epoch)
        txn = self.txns.get(req.transactional_id)
        if error is not None or txn is None:
            self._reply(ticket, error if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR)
            return self._take()
        state = txn.state
        if txn.pending_transition:
            self._reply(ticket, ErrorCode.CONCURRENT_TRANSACTIONS)
        elif state is TxnState.ONGOING:
            self._end(txn, coordinator_epoch, txn.prepare_end(commit, now_ms), ticket)
        elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            # A retry of an EndTxn that completed: the same answer, if it asks the same thing.
            done = (state is TxnState.COMPLETE_COMMIT) == commit
            self._reply(ticket, ErrorCode.NONE if done else ErrorCode.INVALID_TXN_STATE)
        elif state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            same = (state is TxnState.PREPARE_COMMIT) == commit
            self._reply(ticket, ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE)
        else:  # Empty: no transaction to end
            self._reply(ticket, ErrorCode.INVALID_TXN_STATE)
        return self._take()

    def _end(self, txn: TxnMetadata, coordinator_epoch: int, transit: Transit, ticket: Ticket | None) -> None:
        """Write the decision; once it is in the replicas, answer (EndTxn) and send the markers."""

        def decided(error: ErrorCode) -> None:
            self._reply(ticket, error)
            if error == ErrorCode.NONE:
                self._send_markers(txn, coordinator_epoch)

        self._write(txn, coordinator_epoch, transit, decided)

    def _fence_and_abort(self, txn: TxnMetadata, coordinator_epoch: int, ticket: Ticket | None) -> None:
        transit = txn.prepare_fence_and_abort(self.now_ms)
        log.info(
            "fencing producer %d of transactional id %s (epoch now %d) and aborting its transaction",
            txn.producer_id, txn.transactional_id, txn.producer_epoch,
        )  # fmt: skip

        def aborted(error: ErrorCode) -> None:
            if ticket is not None:
                # InitProducerId: the client waits for the abort to finish, then asks again.
                self._reply(ticket, InitResult(error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS))
            if error == ErrorCode.NONE:
                self._send_markers(txn, coordinator_epoch)

        self._write(txn, coordinator_epoch, transit, aborted)

    # --- markers ------------------------------------------------------------------------------------

    def _send_markers(self, txn: TxnMetadata, coordinator_epoch: int) -> None:
        if not txn.partitions:
            self._complete(txn, coordinator_epoch)
            return
        self._effects.append(
            SendMarkers(
                txn.transactional_id,
                coordinator_epoch,
                txn.producer_id,
                txn.producer_epoch,
                txn.state is TxnState.PREPARE_COMMIT,
                frozenset(txn.partitions),
            )
        )

    def marker_written(
        self, now_ms: int, transactional_id: str, coordinator_epoch: int, partition: TopicPartition
    ) -> list[Effect]:
        """The leader of ``partition`` has the marker (or the partition is gone)."""
        self._begin(now_ms)
        txn = self._deciding(transactional_id, coordinator_epoch)
        if txn is not None:
            txn.partitions.discard(partition)
            if not txn.partitions and not txn.pending_transition:
                self._complete(txn, coordinator_epoch)
        return self._take()

    def markers_abandoned(self, now_ms: int, transactional_id: str, coordinator_epoch: int) -> list[Effect]:
        """A partition refused the marker for good (a newer producer epoch or coordinator wrote
        there since): this coordinator stops; whoever superseded it completes the transaction."""
        self._begin(now_ms)
        if self._deciding(transactional_id, coordinator_epoch) is not None:
            log.warning("transactional id %s: markers refused as stale; not completing it here", transactional_id)
        return self._take()

    def _deciding(self, transactional_id: str, coordinator_epoch: int) -> TxnMetadata | None:
        """The transaction, if this coordinator still has it decided in this coordinator epoch."""
        txn = self.txns.get(transactional_id)
        if txn is None or self.coordinator_epoch(self.partition_for(transactional_id)) != coordinator_epoch:
            return None
        if txn.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return None
        return txn

    def _complete(self, txn: TxnMetadata, coordinator_epoch: int) -> None:
        transactional_id = txn.transactional_id

        def completed(error: ErrorCode) -> None:
            if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                # The decision stands and the markers are written: only the record is missing.
                self._complete_retries.add(transactional_id)
                self._schedule(RETRY_COMPLETE, RETRY_COMPLETE_MS)
            elif error != ErrorCode.NONE:
                log.info("transactional id %s: completion not written (%s)", transactional_id, error.name)

        self._write(txn, coordinator_epoch, txn.prepare_complete(self.now_ms), completed)

    # --- writes ----------------------------------------------------------------------------------------

    def _write(self, txn: TxnMetadata, coordinator_epoch: int, transit: Transit, then: Continuation | None) -> None:
        write_id = next(self._write_ids)
        partition = self.partition_for(txn.transactional_id)
        self._writes[write_id] = _PendingWrite(txn.transactional_id, partition, coordinator_epoch, transit, then)
        value = None if transit.state is TxnState.DEAD else encode_value(_stored(transit))
        self._effects.append(Write(write_id, partition, encode_key(txn.transactional_id), value))

    def write_completed(self, now_ms: int, write_id: int, error: ErrorCode) -> list[Effect]:
        """The driver appended (or failed to append) the record of a :class:`Write`, and waited
        for the in-sync replicas."""
        self._begin(now_ms)
        pending = self._writes.pop(write_id, None)
        if pending is None:
            return self._take()
        txn = self.txns.get(pending.transactional_id)
        current = self.coordinator_epoch(pending.partition) == pending.coordinator_epoch
        outcome = write_error(error)
        if txn is None or not current or txn.pending is not pending.transit.state:
            # The partition moved (and perhaps came back) meanwhile: whoever leads it now
            # decides from the log; this broker must not apply anything.
            outcome = ErrorCode.NOT_COORDINATOR
        elif outcome == ErrorCode.NONE:
            txn.complete(pending.transit)
            if pending.transit.state is TxnState.DEAD:
                del self.txns[pending.transactional_id]
        else:
            txn.abandon(pending.transit)
        if pending.then is not None:
            pending.then(outcome)
        if pending.transactional_id in self._parked:
            self._unpark(pending.transactional_id)
        return self._take()

    # --- describing ----------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnDescription:
        if not transactional_id:
            return TxnDescription(ErrorCode.INVALID_REQUEST, transactional_id)
        error, _ = self._status(transactional_id)
        if error is not None:
            return TxnDescription(error, transactional_id)
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state is TxnState.DEAD:
            return TxnDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        return TxnDescription(
            ErrorCode.NONE,
            transactional_id,
            txn.state.kafka_name,
            txn.timeout_ms,
            txn.start_ms,
            txn.producer_id,
            txn.producer_epoch,
            tuple(sorted(txn.partitions)),
        )

    def list_transactions(
        self, now_ms: int, states: Collection[str], producer_ids: Collection[int], duration_ms: int = -1
    ) -> tuple[ErrorCode, list[ListedTxn], list[str]]:
        """(error, transactions, unknown state names) of the ids coordinated here, filtered as
        ListTransactions asks: by state names, producer ids, and running longer than ``duration_ms``."""
        unknown = [name for name in states if TxnState.from_name(name) is None]
        wanted = set(states)
        listed = [
            ListedTxn(t.transactional_id, t.producer_id, t.state.kafka_name)
            for t in self.txns.values()
            if (not wanted or t.state.kafka_name in wanted)
            and (not producer_ids or t.producer_id in producer_ids)
            and (duration_ms < 0 or (t.start_ms >= 0 and t.state in OPEN and now_ms - t.start_ms >= duration_ms))
        ]
        loading = any(not owned.loaded for owned in self._owned.values())
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE), listed, unknown

    # --- time ------------------------------------------------------------------------------------------

    def _schedule(self, key: str, delay_ms: int, *, keep: bool = False) -> None:
        if keep and key in self._deadlines:
            return
        self._deadlines[key] = self.now_ms + delay_ms

    def next_deadline(self) -> int | None:
        """When :meth:`advance` next has something to do (ms), or None."""
        return min(self._deadlines.values(), default=None)

    def advance(self, now_ms: int) -> list[Effect]:
        """Fire every timer due at ``now_ms``: abort timed-out transactions, expire idle ids,
        retry Complete records."""
        self._begin(now_ms)
        for key, deadline in sorted(self._deadlines.items(), key=lambda kv: kv[1]):
            if deadline > self.now_ms:
                continue
            del self._deadlines[key]
            if key == ABORT_TIMED_OUT:
                self._abort_timed_out()
                self._schedule(ABORT_TIMED_OUT, self.config.abort_timed_out_interval_ms)
            elif key == REMOVE_EXPIRED:
                self._remove_expired()
                self._schedule(REMOVE_EXPIRED, self.config.remove_expired_interval_ms)
            elif key == RETRY_COMPLETE:
                self._retry_complete()
            elif key == PARKED:
                self._expire_parked()
        return self._take()

    def _abort_timed_out(self) -> None:
        for txn in list(self.txns.values()):
            due = txn.start_ms + txn.timeout_ms < self.now_ms
            if txn.state is TxnState.ONGOING and not txn.pending_transition and due:
                error, coordinator_epoch = self._status(txn.transactional_id)
                if error is None:
                    log.info("transactional id %s: transaction timed out after %d ms", txn.transactional_id,
                             txn.timeout_ms)  # fmt: skip
                    self._fence_and_abort(txn, coordinator_epoch, None)

    def _remove_expired(self) -> None:
        expiration = self.config.transactional_id_expiration_ms
        for txn in list(self.txns.values()):
            idle = txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            if idle and not txn.pending_transition and txn.last_update_ms + expiration <= self.now_ms:
                error, coordinator_epoch = self._status(txn.transactional_id)
                if error is None:
                    log.info("transactional id %s expired", txn.transactional_id)
                    self._write(txn, coordinator_epoch, txn.prepare_dead(self.now_ms), None)

    def _retry_complete(self) -> None:
        retries, self._complete_retries = self._complete_retries, set()
        for transactional_id in sorted(retries):
            txn = self.txns.get(transactional_id)
            if txn is None or txn.partitions or txn.pending_transition:
                continue
            if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                error, coordinator_epoch = self._status(transactional_id)
                if error is None:
                    self._complete(txn, coordinator_epoch)


def _valid_expected(txn: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: whether a producer naming (producer_id, producer_epoch) may have the id's next
    epoch. A new id (no epoch yet), the current producer id, or a retry of a rotation."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.previous_producer_id and producer_epoch >= 2**15 - 2)
    )


def _stored(transit: Transit) -> StoredTxn:
    return StoredTxn(
        transit.producer_id,
        transit.producer_epoch,
        transit.timeout_ms,
        transit.state,
        transit.partitions,
        transit.last_update_ms,
        transit.start_ms,
    )


__all__ = ["TransactionCoordinator", "write_error"]
