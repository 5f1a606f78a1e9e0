"""Drives the sans-IO transaction coordinator with a fake clock and an in-memory log."""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from typing import Any

from tributary.broker.txn.config import TxnConfig
from tributary.broker.txn.coordinator import TransactionCoordinator
from tributary.broker.txn.messages import (
    AddPartitionsRequest,
    Effect,
    EndRequest,
    InitRequest,
    InitResult,
    NeedProducerId,
    Reply,
    SendMarkers,
    Write,
)
from tributary.broker.txn.records import StoredTxn, decode_key, decode_value
from tributary.protocol.error_codes import ErrorCode

CONFIG = TxnConfig(
    state_log_partitions=4,
    abort_timed_out_interval_ms=1000,
    transactional_id_expiration_ms=3_600_000,
    remove_expired_interval_ms=60_000,
    max_timeout_ms=120_000,
)
TIMEOUT_MS = 60_000
COORDINATOR_EPOCH = 7


class Harness:
    def __init__(self, config: TxnConfig = CONFIG, *, load: bool = True) -> None:
        self.now = 1_000_000
        self.coordinator = TransactionCoordinator(config)
        #: partition -> the records written, in order (the "log").
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.replies: dict[int, Any] = {}
        #: Marker deliveries asked for, in order.
        self.markers: list[SendMarkers] = []
        #: When set, writes fail with this code.
        self.write_error: ErrorCode | None = None
        #: When true, writes wait in ``held`` until :meth:`release_writes`.
        self.hold_writes = False
        self.held: list[Write] = []
        self._tickets = itertools.count(1)
        self.last_ticket = 0
        self._producer_ids = itertools.count(1000)
        if load:
            for partition in range(config.state_log_partitions):
                self.load(partition)

    # --- plumbing ---------------------------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        queue = deque(effects)
        while queue:
            effect = queue.popleft()
            if isinstance(effect, Reply):
                assert effect.ticket not in self.replies, f"ticket {effect.ticket} answered twice"
                self.replies[effect.ticket] = effect.result
            elif isinstance(effect, SendMarkers):
                self.markers.append(effect)
            elif self.hold_writes:
                self.held.append(effect)
            else:
                queue.extend(self._complete(effect))

    def _complete(self, write: Write, error: ErrorCode | None = None) -> list[Effect]:
        outcome = error or self.write_error or ErrorCode.NONE
        if outcome == ErrorCode.NONE:
            self.log[write.partition].append((write.key, write.value))
        return self.coordinator.write_completed(self.now, write.write_id, outcome)

    def release_writes(self, error: ErrorCode | None = None) -> None:
        held, self.held = self.held, []
        self.hold_writes = False
        for write in held:
            self.apply(self._complete(write, error))

    def load(self, partition: int, epoch: int = COORDINATOR_EPOCH) -> None:
        token = self.coordinator.begin_loading(partition, epoch)
        self.apply(self.coordinator.finish_loading(self.now, partition, token, list(self.log[partition])))

    def advance(self, ms: int) -> None:
        self.now += ms
        self.apply(self.coordinator.advance(self.now))

    def stored(self, transactional_id: str) -> StoredTxn | None:
        """The last record written for the id (None: none, or a tombstone)."""
        partition = self.coordinator.partition_for(transactional_id)
        found = [v for k, v in self.log[partition] if decode_key(k) == transactional_id]
        return decode_value(found[-1]) if found and found[-1] is not None else None

    # --- requests ------------------------------------------------------------------------

    def init(self, transactional_id: str, timeout_ms: int = TIMEOUT_MS, expected: tuple[int, int] | None = None) -> Any:
        ticket = next(self._tickets)
        request = InitRequest(transactional_id, timeout_ms, expected)
        effects = self.coordinator.init_producer_id(self.now, ticket, request)
        if isinstance(effects, NeedProducerId):
            effects = self.coordinator.init_producer_id(self.now, ticket, request, next(self._producer_ids))
            assert not isinstance(effects, NeedProducerId)
        self.apply(effects)
        return self.replies.get(ticket)

    def add(self, transactional_id: str, producer: InitResult, *partitions: tuple[str, int]) -> Any:
        """The answer, or None while the request waits (see :attr:`last_ticket`)."""
        ticket = self.last_ticket = next(self._tickets)
        request = AddPartitionsRequest(
            transactional_id, producer.producer_id, producer.producer_epoch, frozenset(partitions)
        )
        self.apply(self.coordinator.add_partitions(self.now, ticket, request))
        return self.replies.get(ticket)

    def end(self, transactional_id: str, producer: InitResult, commit: bool) -> Any:
        ticket = next(self._tickets)
        request = EndRequest(transactional_id, producer.producer_id, producer.producer_epoch, commit)
        self.apply(self.coordinator.end_txn(self.now, ticket, request))
        return self.replies.get(ticket)

    def deliver(self, markers: SendMarkers | None = None) -> None:
        """Every partition of ``markers`` (default: every delivery asked for) has its marker."""
        deliveries = [markers] if markers is not None else list(self.markers)
        for delivery in deliveries:
            if delivery in self.markers:
                self.markers.remove(delivery)
            for tp in sorted(delivery.partitions):
                self.apply(
                    self.coordinator.marker_written(self.now, delivery.transactional_id, delivery.coordinator_epoch, tp)
                )
