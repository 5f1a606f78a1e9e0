"""The group coordinator of one broker, as a sans-IO state machine.

It coordinates the groups whose ``__consumer_offsets`` partition this broker
leads. Inputs are method calls carrying the current time (milliseconds) and, for
requests that may have to wait (JoinGroup, SyncGroup, OffsetCommit), a ticket;
outputs are results and :mod:`effects <.messages>`: replies completing tickets
and records to append. Nothing here sleeps, reads a clock or touches a file, so
tests drive it with a fake clock (see ``tests/broker/group``) and
:mod:`.service` drives it with trio.

Ownership of offsets partitions follows the cluster: the driver calls
:meth:`begin_loading` when this broker becomes a partition's leader, feeds the
partition's records to :meth:`finish_loading`, and calls :meth:`unload` when the
leadership goes. Requests for groups of a partition being loaded get
COORDINATOR_LOAD_IN_PROGRESS; of a partition not led here, NOT_COORDINATOR.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from enum import Enum

from tributary.broker.group.config import GroupConfig
from tributary.broker.group.consumer_classic import Migration, tombstones
from tributary.broker.group.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupState,
    TopicImage,
)
from tributary.broker.group.consumer_membership import Change, ConsumerGroups, Refused
from tributary.broker.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from tributary.broker.group.loading import PartitionContents, read_partition
from tributary.broker.group.member import Ticket
from tributary.broker.group.membership import Membership
from tributary.broker.group.messages import (
    CommitRequest,
    CommitResult,
    ConsumerGroupSummary,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    ConsumerMemberSummary,
    Effect,
    FetchResult,
    GroupSummary,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    Loaded,
    MemberSummary,
    NamedPartitions,
    SyncRequest,
    SyncResult,
    TxnCommitRequest,
)
from tributary.broker.group.offsets import GroupOffsets, OffsetAndMetadata, TopicPartition
from tributary.broker.group.placement import partition_for
from tributary.broker.group.records import (
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from tributary.broker.group.runtime import Runtime, offset_store_error
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

EXPIRE_OFFSETS = ("expire-offsets",)


class _Loading(Enum):
    LOADING = "loading"
    LOADED = "loaded"


class GroupCoordinator:
    def __init__(self, config: GroupConfig, *, new_id_suffix: Callable[[], str] | None = None) -> None:
        self.config = config
        self.rt = Runtime(config, new_id_suffix) if new_id_suffix is not None else Runtime(config)
        self.membership = Membership(self.rt)
        self.groups: dict[str, Group] = {}
        #: The consumer groups (KIP-848); a group id is in one of the two dicts at most.
        self.consumers = ConsumerGroups(self.rt)
        self.migration = Migration(self.rt, self.membership, self.groups, self.consumers, self.partition_for)
        self.partition_count = config.offsets_topic_partitions
        self._partitions: dict[int, tuple[_Loading, int]] = {}
        self._load_tokens = 0
        # Transaction markers appended to a partition while it loads: (producer id, committed).
        self._completions_while_loading: dict[int, list[tuple[int, bool]]] = {}

    # --- where groups live --------------------------------------------------------------

    def set_partition_count(self, count: int) -> None:
        """The actual partition count of ``__consumer_offsets`` (it may have been created
        with another setting than this broker's)."""
        self.partition_count = count

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._partitions)

    def is_loading(self, partition: int) -> bool:
        entry = self._partitions.get(partition)
        return entry is not None and entry[0] is _Loading.LOADING

    def _status(self, group_id: str, *, allow_empty_id: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus: whether this broker can serve the group now."""
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        entry = self._partitions.get(self.partition_for(group_id))
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        if entry[0] is _Loading.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # --- loading --------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> int:
        """This broker now leads ``partition``: refuse its groups until loaded. Returns
        the token :meth:`finish_loading` must present (a load that outlived its
        leadership is then ignored)."""
        self._load_tokens += 1
        self._partitions[partition] = (_Loading.LOADING, self._load_tokens)
        return self._load_tokens

    def finish_loading(self, now_ms: int, partition: int, token: int, records: Iterable[Loaded]) -> list[Effect]:
        """Rebuild the partition's groups and offsets from its records, in log order (see
        :mod:`.loading`, transactional offsets included)."""
        self.rt.begin(now_ms)
        if self._partitions.get(partition) != (_Loading.LOADING, token):
            return self.rt.take()
        contents = read_partition(partition, records)
        for group_id in contents.groups():
            self._load_group(partition, group_id, contents)
        self._partitions[partition] = (_Loading.LOADED, token)
        for producer_id, commit in self._completions_while_loading.pop(partition, []):
            for offsets in self._offsets_in(partition):
                offsets.complete_txn(producer_id, commit)
        if EXPIRE_OFFSETS not in self.rt.timers:
            self.rt.timers.schedule(EXPIRE_OFFSETS, self.rt.now_ms + self.config.offsets_retention_check_interval_ms)
        loaded = sum(1 for g in self.groups.values() if g.partition == partition)
        loaded += sum(1 for g in self.consumers.groups.values() if g.partition == partition)
        log.info("__consumer_offsets-%d loaded: %d groups (%d unreadable records)", partition, loaded,
                 contents.skipped)  # fmt: skip
        return self.rt.take()

    def _load_group(self, partition: int, group_id: str, contents: PartitionContents) -> None:
        """One group as its partition's records left it: a consumer group (KIP-848) if its last
        metadata record was one, else a classic group, unless everything of it was deleted."""
        committed = {tp: v for tp, v in contents.offsets.get(group_id, {}).items() if v is not None}
        open_txns = contents.open_txns.get(group_id, {})
        group: Group | ConsumerGroup
        if contents.latest.get(group_id) == "consumer" and group_id in contents.consumer:
            group = self.consumers.groups[group_id] = contents.consumer[group_id]
        else:
            group_metadata = contents.stored.get(group_id)
            if group_metadata is None and not committed and not open_txns:
                return  # deleted
            if group_metadata is not None:
                group = Group.from_stored(group_id, partition, group_metadata, self.rt.now_ms)
            else:
                group = Group(group_id, partition, self.rt.now_ms)
            self.groups[group_id] = group
        for tp, value in committed.items():
            group.offsets.load(tp, value)
        for producer_id, txn_offsets in open_txns.items():
            group.offsets.load_txn(producer_id, txn_offsets)
        if isinstance(group, ConsumerGroup):
            self.consumers.loaded(group)
        else:
            self.membership.loaded(group)

    def unload(self, now_ms: int, partition: int) -> list[Effect]:
        self.rt.begin(now_ms)
        self._completions_while_loading.pop(partition, None)
        if self._partitions.pop(partition, None) is not None:
            for group_id, group in list(self.groups.items()):
                if group.partition == partition:
                    self.membership.unload(group)
                    del self.groups[group_id]
            for group_id, cg in list(self.consumers.groups.items()):
                if cg.partition == partition:
                    self.consumers.unload(cg)
                    del self.consumers.groups[group_id]
            log.info("__consumer_offsets-%d unloaded", partition)
        return self.rt.take()

    # --- the membership APIs ---------------------------------------------------------------

    def join(self, now_ms: int, ticket: Ticket, req: JoinRequest) -> list[Effect]:
        self.rt.begin(now_ms)
        error = self._status(req.group_id)
        if error is None and not (
            self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is None and req.group_id in self.consumers.groups:
            self.migration.classic_group_to_join(req.group_id)  # an Empty consumer group becomes classic
            cg = self.consumers.groups.get(req.group_id)
            if cg is not None:
                self._join_consumer_group(cg, ticket, req)
                return self.rt.take()
        group = self.groups.get(req.group_id)
        if error is None and group is None:
            if req.member_id:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                group = self.groups[req.group_id] = Group(req.group_id, self.partition_for(req.group_id), now_ms)
        if error is not None or group is None:
            self.rt.reply(ticket, JoinResult(error or ErrorCode.UNKNOWN_SERVER_ERROR, req.member_id))
        else:
            self.membership.join(group, ticket, req)
        return self.rt.take()

    def _join_consumer_group(self, group: ConsumerGroup, ticket: Ticket, req: JoinRequest) -> None:
        """A JoinGroup member of a consumer group: answered once its records are written."""

        def done(result: JoinResult | None, error: ErrorCode, message: str | None) -> None:
            if result is not None:
                self.rt.reply(ticket, result)
            elif error != ErrorCode.NONE:
                self.rt.reply(ticket, JoinResult(error, req.member_id))

        self.migration.transact(group.group_id, lambda change: self.migration.join(group, ticket, req, change), done)

    def sync(self, now_ms: int, ticket: Ticket, req: SyncRequest) -> list[Effect]:
        self.rt.begin(now_ms)
        error = self._status(req.group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state is lost with the old coordinator: the member must
            # rejoin, and older clients do not know the loading error here.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        cg = self.consumers.groups.get(req.group_id)
        if error is None and cg is not None:
            try:
                self.rt.reply(ticket, self.migration.sync(cg, req))
            except Refused as exc:
                self.rt.reply(ticket, SyncResult(exc.error))
            return self.rt.take()
        group = self.groups.get(req.group_id)
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None or group is None:
            self.rt.reply(ticket, SyncResult(error or ErrorCode.UNKNOWN_SERVER_ERROR))
        else:
            self.membership.sync(group, ticket, req)
        return self.rt.take()

    def heartbeat(
        self, now_ms: int, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> tuple[ErrorCode, list[Effect]]:
        self.rt.begin(now_ms)
        error = self._status(group_id)
        group = self.groups.get(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.NONE  # as Kafka: nothing to check yet, and nothing is lost by waiting
        elif error is None:
            cg = self.consumers.groups.get(group_id)
            if cg is not None:
                error = self.migration.heartbeat(cg, generation_id, member_id, group_instance_id)
            elif group is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                error = self.membership.heartbeat(group, generation_id, member_id, group_instance_id)
        return error, self.rt.take()

    def leave(self, now_ms: int, group_id: str, leaving: list[LeavingMember]) -> tuple[LeaveResult, list[Effect]]:
        self.rt.begin(now_ms)
        error = self._status(group_id)
        group = self.groups.get(group_id)
        cg = self.consumers.groups.get(group_id)
        if error is not None:
            result = LeaveResult(error)
        elif cg is not None:
            # Answered with the outcome for each member at once; if the write then fails the
            # group is put back, and the members leave again when their sessions end.
            outcome: list[LeaveResult] = []
            self.migration.transact(
                group_id, lambda change: outcome.append(self.migration.leave(cg, leaving, change)), lambda *_: None
            )
            result = outcome[0] if outcome else LeaveResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        elif group is None:
            result = LeaveResult(ErrorCode.NONE, tuple((who, ErrorCode.UNKNOWN_MEMBER_ID) for who in leaving))
        else:
            result = self.membership.leave(group, leaving)
        return result, self.rt.take()

    # --- ConsumerGroupHeartbeat (KIP-848) -------------------------------------------------------

    def consumer_heartbeat(self, now_ms: int, ticket: Ticket, req: ConsumerHeartbeatRequest) -> list[Effect]:
        """ConsumerGroupHeartbeat: answered once the records it causes are in the log."""
        self.rt.begin(now_ms)
        try:
            self.consumers.validate(req)
        except Refused as exc:
            self.rt.reply(ticket, ConsumerHeartbeatResult(exc.error, exc.message))
            return self.rt.take()
        status = self._status(req.group_id)
        if status is not None:
            self.rt.reply(ticket, ConsumerHeartbeatResult(status))
            return self.rt.take()

        def op(change: Change) -> ConsumerHeartbeatResult:
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                group = self.consumers.groups.get(req.group_id)
                if group is None:
                    raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
                return self.consumers.leave(group, req, change, self.migration.fence)
            if req.member_epoch == 0:
                group = self.migration.consumer_group_to_join(req.group_id, change)
            else:
                group = self.consumers.groups.get(req.group_id)
                if group is None:
                    raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
            return self.consumers.heartbeat(group, req, change)

        def done(result: ConsumerHeartbeatResult | None, error: ErrorCode, message: str | None) -> None:
            self.rt.reply(ticket, result if result is not None else ConsumerHeartbeatResult(error, message))

        self.migration.transact(req.group_id, op, done)
        return self.rt.take()

    def update_topics(self, now_ms: int, image: TopicImage) -> list[Effect]:
        """The cluster's topics changed: consumer groups subscribed to what changed (or with
        a regex, when topics come or go) recompute their subscription at their next heartbeat."""
        self.rt.begin(now_ms)
        before = self.consumers.topics.by_name
        self.consumers.topics = image
        changed = {n for n in set(before) | set(image.by_name) if before.get(n) != image.by_name.get(n)}
        names_changed = set(before) != set(image.by_name)
        for group in self.consumers.groups.values():
            if (names_changed and group.regexes()) or any(group.subscribed_topics().keys() & changed):
                group.metadata_stale = True
        return self.rt.take()

    # --- offsets ----------------------------------------------------------------------------

    def commit(self, now_ms: int, ticket: Ticket, req: CommitRequest) -> list[Effect]:
        self.rt.begin(now_ms)
        errors = dict(req.refused)
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in req.offsets.items():
            if len(value.metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                expire = now_ms + req.retention_ms if req.retention_ms >= 0 else None
                offsets[tp] = dataclasses.replace(value, commit_timestamp=now_ms, expire_timestamp=expire)
        error = self._status(req.group_id, allow_empty_id=True)
        cg = self.consumers.groups.get(req.group_id)
        if cg is not None:
            self._commit_to_consumer_group(cg, ticket, req, error=error, offsets=offsets, errors=errors)
            return self.rt.take()
        group = self.groups.get(req.group_id)
        if error is None and group is None:
            if req.generation_id < 0:
                # Offsets stored for a consumer that does not use group management.
                group = self.groups[req.group_id] = Group(req.group_id, self.partition_for(req.group_id), now_ms)
            else:
                error = ErrorCode.ILLEGAL_GENERATION
        if error is None and group is not None:
            error = self._validate_commit(group, req)
        if error is not None or group is None:
            errors.update(dict.fromkeys(offsets, error or ErrorCode.UNKNOWN_SERVER_ERROR))
            self.rt.reply(ticket, CommitResult(errors))
        else:
            if group.is_(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                self.membership.touch(group, req.member_id)
            self._store_offsets(group, ticket, offsets, errors)
        return self.rt.take()

    def _validate_commit(self, group: Group, req: CommitRequest) -> ErrorCode | None:
        """Kafka's validateOffsetCommit, then the state check of doCommitOffsets."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # a simple consumer or an admin tool: no membership to check
        error: ErrorCode | None = None
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self.membership.validate_member(group, req.member_id, req.group_instance_id)
            if error is None and req.generation_id != group.generation:
                error = ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(GroupState.EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a group that has them
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            # The member knows the new generation but has no assignment yet.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        return error

    def _commit_to_consumer_group(
        self,
        group: ConsumerGroup,
        ticket: Ticket,
        req: CommitRequest,
        *,
        error: ErrorCode | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        errors: dict[TopicPartition, ErrorCode],
    ) -> None:
        error = error or self._validate_consumer_commit(group, req)
        if error is not None:
            self.rt.reply(ticket, CommitResult({**errors, **dict.fromkeys(offsets, error)}))
        else:
            self._store_offsets(group, ticket, offsets, errors)

    @staticmethod
    def _validate_consumer_commit(group: ConsumerGroup, req: CommitRequest) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: the member's epoch must be current
        (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a member that joined with JoinGroup).
        Kafka also wants OffsetCommit v9+ from consumer-protocol members; any version is
        accepted here, since the epoch travels in the generation field of every version."""
        if req.generation_id < 0 and not group.members:
            return None  # an admin tool, or a consumer without group management
        member = group.members.get(req.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def _store_offsets(
        self,
        group: Group | ConsumerGroup,
        ticket: Ticket,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        errors: dict[TopicPartition, ErrorCode],
    ) -> None:
        if not offsets:
            self.rt.reply(ticket, CommitResult(errors))
            return
        records = [
            (encode_offset_key(group.group_id, topic, partition), encode_offset_value(value))
            for (topic, partition), value in offsets.items()
        ]
        group.offsets.begin_commit(offsets)

        def written(error: ErrorCode) -> None:
            dead = group.dead if isinstance(group, ConsumerGroup) else group.is_(GroupState.DEAD)
            group.offsets.end_commit(offsets, written=error == ErrorCode.NONE and not dead)
            outcome = offset_store_error(error)
            self.rt.reply(ticket, CommitResult({**errors, **dict.fromkeys(offsets, outcome)}))

        self.rt.write(group.partition, records, written)

    def txn_commit(self, now_ms: int, ticket: Ticket, req: TxnCommitRequest) -> list[Effect]:
        """TxnOffsetCommit: written as the producer's transactional batch; the offsets count once
        the transaction's commit marker reaches the partition (:meth:`complete_txn`)."""
        self.rt.begin(now_ms)
        errors = dict(req.refused)
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in req.offsets.items():
            if len(value.metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                offsets[tp] = dataclasses.replace(value, commit_timestamp=now_ms)
        error = self._status(req.group_id)
        group: Group | ConsumerGroup | None = self.consumers.groups.get(req.group_id) or self.groups.get(req.group_id)
        if error is None and group is None:
            # As Kafka: a group known only from transactional commits (an empty one).
            group = self.groups[req.group_id] = Group(req.group_id, self.partition_for(req.group_id), now_ms)
        if error is None and group is not None:
            if isinstance(group, ConsumerGroup):
                error = self._validate_consumer_txn_commit(group, req)
            else:
                error = self._validate_txn_commit(group, req)
        if error is not None or group is None:
            errors.update(dict.fromkeys(offsets, error or ErrorCode.UNKNOWN_SERVER_ERROR))
            self.rt.reply(ticket, CommitResult(errors))
            return self.rt.take()
        if not offsets:
            self.rt.reply(ticket, CommitResult(errors))
            return self.rt.take()
        records = [
            (encode_offset_key(group.group_id, topic, partition), encode_offset_value(value))
            for (topic, partition), value in offsets.items()
        ]
        group.offsets.begin_commit(offsets)

        def written(error: ErrorCode) -> None:
            dead = group.dead if isinstance(group, ConsumerGroup) else group.is_(GroupState.DEAD)
            group.offsets.end_commit(offsets, written=error == ErrorCode.NONE and not dead, producer_id=req.producer_id)
            self.rt.reply(ticket, CommitResult({**errors, **dict.fromkeys(offsets, offset_store_error(error))}))

        self.rt.write(group.partition, records, written, producer=(req.producer_id, req.producer_epoch))
        return self.rt.take()

    def _validate_txn_commit(self, group: Group, req: TxnCommitRequest) -> ErrorCode | None:
        """Kafka's doTxnCommitOffsets: a member and generation are checked only when given (v3+)."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.member_id:
            error = self.membership.validate_member(group, req.member_id, req.group_instance_id)
            if error is not None:
                return error
        if req.generation_id >= 0 and req.generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _offsets_in(self, partition: int) -> list[GroupOffsets]:
        """The committed offsets of every group, classic or consumer, living in ``partition``."""
        classic = [g.offsets for g in self.groups.values() if g.partition == partition]
        return classic + [g.offsets for g in self.consumers.groups.values() if g.partition == partition]

    @staticmethod
    def _validate_consumer_txn_commit(group: ConsumerGroup, req: TxnCommitRequest) -> ErrorCode | None:
        """A transactional commit into a consumer group (KIP-848): a member, when named, must
        exist, and its epoch, when given, must be current."""
        if group.dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not req.member_id:
            return None
        member = group.members.get(req.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation_id >= 0 and req.generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def complete_txn(self, now_ms: int, partition: int, producer_id: int, commit: bool) -> list[Effect]:
        """The transaction's marker is in ``partition``: its offsets there count, or go."""
        self.rt.begin(now_ms)
        if self.is_loading(partition):
            # The load may have read the log before this marker: it is applied once loaded.
            self._completions_while_loading.setdefault(partition, []).append((producer_id, commit))
            return self.rt.take()
        applied = sum(offsets.complete_txn(producer_id, commit) for offsets in self._offsets_in(partition))
        if applied:
            log.info("__consumer_offsets-%d: producer %d's transaction %s %d offsets", partition, producer_id,
                     "committed" if commit else "aborted", applied)  # fmt: skip
        return self.rt.take()

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None) -> FetchResult:
        """Committed offsets (None where nothing is committed); ``partitions`` None: all."""
        error = self._status(group_id, allow_empty_id=True)
        if error is not None:
            return FetchResult(error)
        group: Group | ConsumerGroup | None = self.groups.get(group_id) or self.consumers.groups.get(group_id)
        if partitions is None:
            return FetchResult(ErrorCode.NONE, dict(group.offsets) if group is not None else {})
        return FetchResult(
            ErrorCode.NONE, {tp: group.offsets.get(tp) if group is not None else None for tp in partitions}
        )

    def delete_groups(self, now_ms: int, group_ids: Iterable[str]) -> tuple[dict[str, ErrorCode], list[Effect]]:
        """DeleteGroups: remove Empty groups with their offsets (tombstones for each offset
        and for the group). A group with members gets NON_EMPTY_GROUP; an unknown one
        GROUP_ID_NOT_FOUND."""
        self.rt.begin(now_ms)
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self._status(group_id)
            cg = self.consumers.groups.get(group_id)
            if error is None and cg is not None:
                results[group_id] = self._delete_consumer_group(cg)
                continue
            group = self.groups.get(group_id)
            if error is None:
                if group is None or group.is_(GroupState.DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_(GroupState.EMPTY):
                    error = ErrorCode.NON_EMPTY_GROUP
            if error is not None or group is None:
                results[group_id] = error or ErrorCode.GROUP_ID_NOT_FOUND
                continue
            committed = [tp for tp, _ in group.offsets]
            group.offsets.remove(committed)
            self.membership.unload(group)  # cancels its timers; leaves it Dead
            del self.groups[group_id]
            records: list[tuple[bytes, bytes | None]] = [
                (encode_offset_key(group_id, topic, partition), None) for topic, partition in committed
            ]
            records.append((encode_group_key(group_id), None))
            self.rt.write(group.partition, records)
            results[group_id] = ErrorCode.NONE
            log.info("group %s deleted with %d committed offsets", group_id, len(committed))
        return results, self.rt.take()

    def _delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """DeleteGroups for a consumer group: only an Empty one goes (NON_EMPTY_GROUP)."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        committed = [tp for tp, _ in group.offsets]
        group.offsets.remove(committed)
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(group.group_id, topic, partition), None) for topic, partition in committed
        ]
        records += Change(group.group_id, records=tombstones(group)).encoded()
        self.consumers.unload(group)
        del self.consumers.groups[group.group_id]
        self.rt.write(group.partition, records)
        log.info("consumer group %s deleted with %d committed offsets", group.group_id, len(committed))
        return ErrorCode.NONE

    def delete_offsets(
        self, now_ms: int, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], list[Effect]]:
        """OffsetDelete: remove some committed offsets of a group, except those of topics
        its live consumers subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        self.rt.begin(now_ms)
        wanted = list(partitions)
        error = self._status(group_id)
        cg = self.consumers.groups.get(group_id)
        group: Group | ConsumerGroup | None = cg or self.groups.get(group_id)
        if error is None and (group is None or (isinstance(group, Group) and group.is_(GroupState.DEAD))):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not None or group is None:
            return error or ErrorCode.GROUP_ID_NOT_FOUND, {}, self.rt.take()
        subscribed: frozenset[str]
        if isinstance(group, ConsumerGroup):
            subscribed = frozenset(group.subscribed_topics())
        else:
            active = not group.is_(GroupState.EMPTY)
            if active and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.NON_EMPTY_GROUP, {}, self.rt.take()
            subscribed = (group.subscribed_topics or frozenset()) if active else frozenset()
        results: dict[TopicPartition, ErrorCode] = {}
        removed: list[TopicPartition] = []
        for tp in wanted:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if group.offsets.get(tp) is not None:
                removed.append(tp)
        group.offsets.remove(removed)
        if removed:
            self.rt.write(group.partition, [(encode_offset_key(group_id, t, p), None) for t, p in removed])
        return ErrorCode.NONE, results, self.rt.take()

    def _expire_offsets(self) -> None:
        now = self.rt.now_ms
        retention = self.config.offsets_retention_ms

        def expired(group: Group | ConsumerGroup) -> list[TopicPartition]:
            if isinstance(group, ConsumerGroup):
                # Kafka: counted from each commit, never for a topic a member subscribes to.
                keep = frozenset(group.subscribed_topics())
                return group.offsets.expired(now, retention, base_timestamp=None, keep_topics=keep)
            if group.protocol_type is None:
                return group.offsets.expired(now, retention, base_timestamp=None)
            if group.is_(GroupState.EMPTY):
                return group.offsets.expired(now, retention, base_timestamp=group.state_timestamp)
            if (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.is_(GroupState.STABLE)
                and group.subscribed_topics is not None
            ):
                return group.offsets.expired(now, retention, base_timestamp=None, keep_topics=group.subscribed_topics)
            return []

        removed = self._delete_offsets(expired)
        if removed:
            log.info("expired %d committed offsets", removed)

    def remove_topic_offsets(self, now_ms: int, topics: Collection[str]) -> list[Effect]:
        """Topics deleted from the cluster take their committed offsets with them (as in
        Kafka), so a topic created again under the same name starts from scratch."""
        self.rt.begin(now_ms)
        removed = self._delete_offsets(lambda group: [tp for tp, _ in group.offsets if tp[0] in topics])
        if removed:
            log.info("removed %d committed offsets of deleted topics %s", removed, sorted(topics))
        return self.rt.take()

    def _delete_offsets(self, select: Callable[[Group | ConsumerGroup], list[TopicPartition]]) -> int:
        """Removes the offsets ``select`` picks, writing their tombstones; a group left
        Empty without offsets is removed (Dead) with them. Returns how many went."""
        now = self.rt.now_ms
        out: dict[int, list[tuple[bytes, bytes | None]]] = {}
        removed = 0
        groups: list[Group | ConsumerGroup] = [*self.groups.values(), *self.consumers.groups.values()]
        for group in groups:
            group_id = group.group_id
            due = select(group)
            group.offsets.remove(due)
            records = out.setdefault(group.partition, [])
            records += [(encode_offset_key(group_id, topic, partition), None) for topic, partition in due]
            removed += len(due)
            if not group.offsets.empty:
                continue
            if isinstance(group, ConsumerGroup):
                if group.members:
                    continue
                records += Change(group_id, records=tombstones(group)).encoded()
                self.consumers.unload(group)
                del self.consumers.groups[group_id]
            elif group.is_(GroupState.EMPTY):
                group.transition(GroupState.DEAD, now)
                del self.groups[group_id]
                if group.generation > 0:  # a group that only stored offsets never wrote metadata
                    records.append((encode_group_key(group_id), None))
            else:
                continue
            log.info("group %s is empty and has no offsets left: removed", group_id)
        for partition, records in sorted(out.items()):
            if records:
                self.rt.write(partition, records)
        return removed

    # --- describing -------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupSummary:
        error = self._status(group_id, allow_empty_id=True)
        if error is not None:
            return GroupSummary(error, group_id)
        if group_id in self.consumers.groups:
            return GroupSummary(ErrorCode.NONE, group_id, GroupState.DEAD.value, consumer_group=True)
        group = self.groups.get(group_id)
        if group is None:
            return GroupSummary(ErrorCode.NONE, group_id, GroupState.DEAD.value)
        stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name is not None else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        protocol = group.protocol_name if stable and group.protocol_name is not None else ""
        return GroupSummary(ErrorCode.NONE, group_id, group.state.value, group.protocol_type or "", protocol, members)

    def consumer_describe(self, group_id: str) -> ConsumerGroupSummary:
        """ConsumerGroupDescribe: a consumer group's epochs, members and assignments."""
        if not group_id:
            return ConsumerGroupSummary(ErrorCode.INVALID_GROUP_ID, group_id)
        error = self._status(group_id)
        if error is not None:
            return ConsumerGroupSummary(error, group_id)
        group = self.consumers.groups.get(group_id)
        if group is None:
            kind = "is not a consumer group" if group_id in self.groups else "not found"
            message = f"Group {group_id} {kind}."
            return ConsumerGroupSummary(ErrorCode.GROUP_ID_NOT_FOUND, group_id, message)
        names = {meta.topic_id: name for name, meta in self.consumers.topics.by_name.items()}

        def named(assignment: Mapping[uuid.UUID, frozenset[int]]) -> NamedPartitions:
            return tuple(
                (topic, names.get(topic, ""), tuple(sorted(ps)))
                for topic, ps in sorted(assignment.items(), key=lambda item: names.get(item[0], ""))
            )

        members = tuple(
            ConsumerMemberSummary(
                m.member_id,
                m.instance_id,
                m.metadata.rack_id,
                m.epoch,
                m.metadata.client_id,
                m.metadata.client_host,
                m.metadata.subscribed_topic_names,
                m.metadata.subscribed_topic_regex or None,
                named(m.assignment.assigned),
                named(group.targets.get(m.member_id, {})),
            )
            for m in group.members.values()
        )
        return ConsumerGroupSummary(
            ErrorCode.NONE,
            group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor=group.preferred_assignor(group.members.values()) or self.consumers.default_assignor,
            members=members,
        )

    def list_groups(
        self, states: Collection[str] = (), types: Collection[str] = ()
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """ListGroups: every group here, or those in ``states`` and of ``types`` (each
        compared case-insensitively, as Kafka does; an unknown type matches nothing)."""
        loading = any(state is _Loading.LOADING for state, _ in self._partitions.values())
        groups = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD)
        ]
        groups += [
            ListedGroup(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state.value, "consumer")
            for g in self.consumers.groups.values()
            if g.state is not ConsumerGroupState.DEAD
        ]
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        groups = [
            g
            for g in groups
            if (not wanted_states or g.state.lower() in wanted_states)
            and (not wanted_types or g.group_type in wanted_types)
        ]
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE), groups

    # --- time and storage --------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When :meth:`advance` next has something to do (ms), or None."""
        return self.rt.timers.next_deadline()

    def advance(self, now_ms: int) -> list[Effect]:
        """Fire every timer due at ``now_ms``."""
        self.rt.begin(now_ms)
        while (key := self.rt.timers.pop_due(self.rt.now_ms)) is not None:
            self._fire(key)
        return self.rt.take()

    def _fire(self, key: object) -> None:
        if key == EXPIRE_OFFSETS:
            self._expire_offsets()
            self.rt.timers.schedule(EXPIRE_OFFSETS, self.rt.now_ms + self.config.offsets_retention_check_interval_ms)
            return
        assert isinstance(key, tuple)
        kind, group_id, *rest = key
        if str(kind).startswith("consumer-"):
            self._consumer_timeout(kind, group_id, rest[0])
            return
        group = self.groups.get(group_id)
        if group is None:
            return
        if kind == "heartbeat":
            self.membership.on_heartbeat_timeout(group, rest[0])
        elif kind == "pending":
            self.membership.on_pending_timeout(group, rest[0])
        elif kind == "join":
            self.membership.on_join_timeout(group)
        elif kind == "sync":
            self.membership.on_sync_timeout(group)

    def _consumer_timeout(self, kind: str, group_id: str, member_id: str) -> None:
        """A consumer group member's session, rebalance, join or sync timeout: fence it."""
        group = self.consumers.groups.get(group_id)
        epoch = self.consumers.rebalance_epoch(group_id, member_id) if kind == "consumer-rebalance" else None
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        if kind == "consumer-rebalance" and member.epoch != epoch:
            return  # it moved on from the epoch it had to revoke in
        why = {
            "consumer-session": "its session expired",
            "consumer-rebalance": f"it did not revoke its partitions within {member.rebalance_timeout_ms} ms",
            "consumer-join": "it did not join again within its rebalance timeout",
            "consumer-sync": "it did not send SyncGroup within its rebalance timeout",
        }.get(kind, kind)
        log.info("group %s: fencing member %s: %s", group_id, member_id, why)

        def done(_: None, error: ErrorCode, message: str | None) -> None:
            if error != ErrorCode.NONE:
                # Not written: the member stays; try again after another session.
                self.consumers.schedule_session(group, member_id, self.config.consumer_session_timeout_ms)

        self.migration.transact(group_id, lambda change: self.migration.fence(group, member, change), done)

    def write_completed(self, now_ms: int, write_id: int, error: ErrorCode) -> list[Effect]:
        """The driver appended (or failed to append) the records of a :class:`Write`."""
        self.rt.begin(now_ms)
        self.rt.complete_write(write_id, error)
        return self.rt.take()
