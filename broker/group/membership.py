"""The classic group membership protocol for one group: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and the timers that drive rebalances, as Kafka's
GroupCoordinator decides them.

Theory of operation. A rebalance starts (PreparingRebalance) when a member
joins, leaves, changes its protocols or dies, or when the leader rejoins. Every
member must then send JoinGroup, which waits. The rebalance completes once all
known members have joined, or when the rebalance timeout (the largest of the
members') expires; members that did not rejoin are dropped (static members are
kept: they are expected back). The first rebalance of an empty group waits
``group.initial.rebalance.delay.ms`` instead, longer while newcomers keep
arriving, so that a group starting up forms in one generation. Completion bumps
the generation, picks the protocol by vote among those every member supports,
and answers every waiting JoinGroup; the leader gets everyone's metadata
(CompletingRebalance). Its SyncGroup carries the assignment, which is stored
in ``__consumer_offsets`` and then handed to every member (Stable). Members that
do not send SyncGroup within the rebalance timeout are dropped.

Liveness: each member has a session deadline, pushed back by heartbeats (and by
commits and syncs). A member waiting in JoinGroup or SyncGroup is alive by
definition; a new member that never completes a join is dropped after
:data:`NEW_MEMBER_JOIN_TIMEOUT_MS`; a member id handed out with
MEMBER_ID_REQUIRED is forgotten after the session timeout if it never joins.

Timer keys: ``("heartbeat", group, member)``, ``("pending", group, member)``,
``("join", group)``, ``("sync", group)``.
"""

from __future__ import annotations

import logging

from tributary.broker.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from tributary.broker.group.member import Member, Ticket
from tributary.broker.group.messages import (
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    SyncRequest,
    SyncResult,
)
from tributary.broker.group.records import encode_group_key, encode_group_value
from tributary.broker.group.runtime import Continuation, Runtime, group_store_error
from tributary.protocol import codec
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerProtocolAssignment

log = logging.getLogger(__name__)

#: A new member has no session until its first rebalance completes; if it never
#: does (a client that gave up), this removes it (Kafka's NewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

#: What a consumer gets when the leader assigned it nothing: an empty
#: ConsumerProtocolAssignment (v0, behind its int16 version) rather than zero
#: bytes, which consumers cannot parse.
EMPTY_CONSUMER_ASSIGNMENT = b"\x00\x00" + codec.encode(ConsumerProtocolAssignment(), 0)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class Membership:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        # Groups whose current rebalance is the initial one (waits the initial delay,
        # never completes early), with (current delay, rebalance time left).
        self._initial_join: dict[str, tuple[int, int]] = {}
        #: Rebalances started (a move to PreparingRebalance) and completed (a new
        #: generation with members) since start: read by the broker's metrics.
        self.rebalances_started = 0
        self.rebalances_completed = 0

    # --- JoinGroup ---------------------------------------------------------------------

    def join(self, group: Group, ticket: Ticket, req: JoinRequest) -> None:
        if group.is_(DEAD):
            # Unloaded meanwhile: the member finds the coordinator again.
            self._reply_join(ticket, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
        elif not group.supports_protocols(req.protocol_type, frozenset(name for name, _ in req.protocols)):
            self._reply_join(ticket, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        elif not req.member_id:
            self._join_new_member(group, ticket, req)
        elif req.member_id in group.pending_members and req.group_instance_id is None:
            self._add_member_and_rebalance(group, req.member_id, ticket, req)
        else:
            self._join_current_member(group, ticket, req)
        if group.is_(PREPARING):
            self._try_complete_join(group)

    def _join_new_member(self, group: Group, ticket: Ticket, req: JoinRequest) -> None:
        member_id = self.rt.new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, member_id, ticket, req)
            else:
                self._replace_static_member(group, old_id, member_id, ticket, req)
        elif req.require_known_member_id:
            # The member must come back with this id: a client that dies before it
            # does leaves no member behind, only a pending id that times out.
            group.pending_members.add(member_id)
            self.rt.timers.schedule(("pending", group.group_id, member_id), self.rt.now_ms + req.session_timeout_ms)
            self._reply_join(ticket, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_member_and_rebalance(group, member_id, ticket, req)

    def _join_current_member(self, group: Group, ticket: Ticket, req: JoinRequest) -> None:
        error = self.validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            self._reply_join(ticket, JoinResult(error, req.member_id))
            return
        member = group.members[req.member_id]
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, ticket, req)
        elif group.is_(COMPLETING):
            if member.matches(req.protocols):
                # It missed the JoinGroup answer: answer again for the current generation.
                self._reply_join(ticket, self._generation_info(group, member))
            else:
                self._update_member_and_rebalance(group, member, ticket, req)
        elif group.is_(STABLE):
            # The leader rejoining is how a consumer asks for a rebalance (its topics changed).
            if group.is_leader(member.member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, ticket, req)
            else:
                self._reply_join(ticket, self._generation_info(group, member, with_members=False))
        else:
            self._reply_join(ticket, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))

    def _generation_info(self, group: Group, member: Member, *, with_members: bool = True) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(JoinedMember(*m) for m in group.current_member_metadata())
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )

    def _add_member_and_rebalance(self, group: Group, member_id: str, ticket: Ticket, req: JoinRequest) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
        )
        if group.is_(PREPARING) and group.generation == 0:
            group.new_member_added = True
        group.add(member, ticket)
        self.rt.timers.cancel(("pending", group.group_id, member_id))
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(self, group: Group, member: Member, ticket: Ticket, req: JoinRequest) -> None:
        self._update_member(group, member, ticket, req)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_member(self, group: Group, member: Member, ticket: Ticket | None, req: JoinRequest) -> None:
        group.update_protocols(member, req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.awaiting_join is not None and member.awaiting_join != ticket:
            # A second JoinGroup while the first waits (the client gave up on it): the
            # first must still be answered, or its handler would wait forever.
            self._reply_join(member.awaiting_join, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = ticket

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, ticket: Ticket, req: JoinRequest) -> None:
        """A static member came back without its member id (a restarted process): it
        takes over its old place, assignment included, and the old incarnation is fenced."""
        assert req.group_instance_id is not None
        instance_id = req.group_instance_id
        previous_leader = group.leader_id or ""
        old = group.members[old_id]
        if old.awaiting_join is not None:
            self._reply_join(old.awaiting_join, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            self.rt.reply(old.awaiting_sync, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        self.rt.timers.cancel(("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._update_member(group, member, ticket, req)

        if group.is_(STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed its protocols")
                return
            # Same protocol: no rebalance. Persist the new member id first; the member
            # gets the old leader id back so that, even if it is the leader, it does not
            # compute an assignment a Stable group would never hand out.
            generation = group.generation

            def stored(error: ErrorCode) -> None:
                if member.awaiting_join != ticket:
                    return  # answered meanwhile (a rebalance completed, or the group was unloaded)
                if error != ErrorCode.NONE:
                    log.warning("group %s: storing static member %s failed: %s", group.group_id, new_id, error.name)
                    protocols, rebalance_timeout, session_timeout = saved
                    group.update_protocols(member, protocols)
                    member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout, session_timeout
                    member.awaiting_join = None
                    if group.has(new_id):
                        group.replace_static_member(instance_id, new_id, old_id)
                        self.rt.timers.cancel(("heartbeat", group.group_id, new_id))
                        self._schedule_heartbeat(group, member)
                    self._reply_join(ticket, JoinResult(group_store_error(error), "", generation))
                    return
                member.awaiting_join = None
                self._reply_join(
                    ticket,
                    JoinResult(
                        ErrorCode.NONE,
                        new_id,
                        group.generation,
                        group.protocol_type,
                        group.protocol_name,
                        previous_leader,
                    ),
                )

            self.store_group(group, {m.member_id: m.assignment for m in group.members.values()}, stored)
        elif group.is_(COMPLETING):
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")

    # --- completing a join ----------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._clear_pending_sync(group)
        now = self.rt.now_ms
        key = ("join", group.group_id)
        if group.is_(EMPTY):
            delay = self.rt.config.initial_rebalance_delay_ms
            self._initial_join[group.group_id] = (delay, max(group.rebalance_timeout_ms - delay, 0))
            self.rt.timers.schedule(key, now + delay)
        else:
            self._initial_join.pop(group.group_id, None)
            self.rt.timers.schedule(key, now + group.rebalance_timeout_ms)
        log.info(
            "group %s: preparing to rebalance from %s, generation %d (%s)",
            group.group_id,
            group.state,
            group.generation,
            reason,
        )
        group.transition(PREPARING, now)
        self.rebalances_started += 1
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if not group.is_(PREPARING) or group.group_id in self._initial_join or not group.has_all_members_joined():
            return
        self.rt.timers.cancel(("join", group.group_id))
        self._complete_join(group)

    def on_join_timeout(self, group: Group) -> None:
        if not group.is_(PREPARING):
            return
        initial = self._initial_join.get(group.group_id)
        if initial is not None:
            delay, remaining = initial
            if group.new_member_added and remaining:
                # Newcomers arrived during the initial delay: wait once more for stragglers.
                group.new_member_added = False
                next_delay = min(self.rt.config.initial_rebalance_delay_ms, remaining)
                self._initial_join[group.group_id] = (next_delay, max(remaining - delay, 0))
                self.rt.timers.schedule(("join", group.group_id), self.rt.now_ms + next_delay)
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._initial_join.pop(group.group_id, None)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, member.member_id)
                self._remove(group, member)
        if group.is_(DEAD):
            return
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that have not rejoined: wait for them, or for their sessions to end.
            self.rt.timers.schedule(("join", group.group_id), self.rt.now_ms + group.rebalance_timeout_ms)
            return
        group.init_next_generation(self.rt.now_ms)
        if group.is_(EMPTY):
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            self.store_group(group, {}, None)
            return
        self.rebalances_completed += 1
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            if member.awaiting_join is not None:
                self._reply_join(member.awaiting_join, self._generation_info(group, member))
                member.awaiting_join = None
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self.rt.timers.schedule(("sync", group.group_id), self.rt.now_ms + group.rebalance_timeout_ms)

    # --- SyncGroup ---------------------------------------------------------------------------

    def sync(self, group: Group, ticket: Ticket, req: SyncRequest) -> None:
        member_id = req.member_id
        error: ErrorCode | None
        if group.is_(DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = self.validate_member(group, member_id, req.group_instance_id)
            if error is None and req.generation_id != group.generation:
                error = ErrorCode.ILLEGAL_GENERATION
            elif error is None and group.is_(EMPTY):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif error is None and group.is_(PREPARING):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            self.rt.reply(ticket, SyncResult(error))
            return
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.is_(STABLE):
            result = SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
            self.rt.reply(ticket, result)
            self._schedule_heartbeat(group, member)
            return
        # CompletingRebalance: wait for the leader's assignment.
        if member.awaiting_sync is not None and member.awaiting_sync != ticket:
            self.rt.reply(member.awaiting_sync, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = ticket
        if not group.is_leader(member_id):
            return
        empty = EMPTY_CONSUMER_ASSIGNMENT if group.protocol_type == CONSUMER_PROTOCOL_TYPE else b""
        assignment = {mid: req.assignments.get(mid) or empty for mid in group.members}
        generation = group.generation

        def stored(error: ErrorCode) -> None:
            # The group may have moved on while the record was being written.
            if not group.is_(COMPLETING) or group.generation != generation:
                return
            if error != ErrorCode.NONE:
                log.warning("group %s: storing the assignment failed: %s", group.group_id, error.name)
                self._reset_and_propagate_assignment_error(group, group_store_error(error))
                self._maybe_prepare_rebalance(group, "storing the assignment failed")
                return
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, empty)
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition(STABLE, self.rt.now_ms)

        self.store_group(group, assignment, stored)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.awaiting_sync is None:
                continue
            if ok:
                result = SyncResult(error, member.assignment, group.protocol_type, group.protocol_name)
            else:
                result = SyncResult(error)
            self.rt.reply(member.awaiting_sync, result)
            member.awaiting_sync = None
            # Its session may have lapsed while it waited: it starts afresh.
            self._schedule_heartbeat(group, member)

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.rt.timers.cancel(("sync", group.group_id))

    def _clear_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        self.rt.timers.cancel(("sync", group.group_id))

    def on_sync_timeout(self, group: Group) -> None:
        if not group.is_(COMPLETING, STABLE) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        log.info("group %s: members %s sent no SyncGroup in time; removing them", group.group_id, late)
        for member_id in late:
            member = group.members.get(member_id)
            if member is not None:
                self._remove(group, member)
        self._prepare_rebalance(group, f"members {late} sent no SyncGroup")

    # --- Heartbeat and LeaveGroup -------------------------------------------------------------

    def heartbeat(self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    def touch(self, group: Group, member_id: str) -> None:
        """A member proved alive by other means (an offset commit)."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)

    def leave(self, group: Group, leaving: list[LeavingMember]) -> LeaveResult:
        if group.is_(DEAD):
            return LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results = []
        for who in leaving:
            error = self._leave_one(group, who)
            results.append((who, error))
        return LeaveResult(ErrorCode.NONE, tuple(results))

    def _leave_one(self, group: Group, who: LeavingMember) -> ErrorCode:
        if not who.member_id:
            # An administrator removing a static member by its instance id.
            current = group.static_member_id(who.group_instance_id) if who.group_instance_id is not None else None
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_and_update(group, group.members[current], "left (removed by instance id)")
            return ErrorCode.NONE
        if who.member_id in group.pending_members:
            group.pending_members.discard(who.member_id)
            self.rt.timers.cancel(("pending", group.group_id, who.member_id))
            if group.is_(PREPARING):
                self._try_complete_join(group)
            return ErrorCode.NONE
        error = self.validate_member(group, who.member_id, who.group_instance_id)
        if error is not None:
            return error
        self._remove_and_update(group, group.members[who.member_id], "left the group")
        return ErrorCode.NONE

    # --- member expiry ---------------------------------------------------------------------------

    def on_heartbeat_timeout(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or group.is_(DEAD):
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return  # waiting on the group, not failing; rescheduled when the wait ends
        self._remove_and_update(group, member, "session timed out" if not member.is_new else "never completed a join")

    def on_pending_timeout(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            log.info("group %s: pending member %s never joined; forgetting it", group.group_id, member_id)
            group.pending_members.discard(member_id)
            if group.is_(PREPARING):
                self._try_complete_join(group)

    def _remove_and_update(self, group: Group, member: Member, why: str) -> None:
        log.info("group %s: member %s %s; removing it", group.group_id, member.member_id, why)
        self._remove(group, member)
        if group.is_(STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} {why}")
        elif group.is_(PREPARING):
            self._try_complete_join(group)

    def _remove(self, group: Group, member: Member) -> None:
        # Whatever it waits for is answered first, so the client starts over.
        if member.awaiting_join is not None:
            self._reply_join(member.awaiting_join, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self.rt.reply(member.awaiting_sync, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        group.remove(member.member_id)
        self.rt.timers.cancel(("heartbeat", group.group_id, member.member_id))

    # --- loading and unloading -------------------------------------------------------------------

    def loaded(self, group: Group) -> None:
        """A group read back from the log: its members get a session from now."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    def unload(self, group: Group) -> None:
        """This broker no longer coordinates the group: whoever waits is told so."""
        self.retire(group, ErrorCode.NOT_COORDINATOR)
        group.transition(DEAD, self.rt.now_ms)

    def retire(self, group: Group, error: ErrorCode) -> None:
        """The group stops running here (unloaded, or become a consumer group): whoever
        waits is answered ``error`` and its timers go; its data stays as it is."""
        for member in group.members.values():
            if member.awaiting_join is not None:
                self._reply_join(member.awaiting_join, JoinResult(error, member.member_id))
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                self.rt.reply(member.awaiting_sync, SyncResult(error))
                member.awaiting_sync = None
            self.rt.timers.cancel(("heartbeat", group.group_id, member.member_id))
        for member_id in group.pending_members:
            self.rt.timers.cancel(("pending", group.group_id, member_id))
        self.rt.timers.cancel(("join", group.group_id))
        self.rt.timers.cancel(("sync", group.group_id))
        self._initial_join.pop(group.group_id, None)

    def revive(self, group: Group) -> None:
        """A retired group runs again (its retirement was not written): sessions and the
        timer of the phase it is in start afresh."""
        self.loaded(group)
        if group.is_(PREPARING):
            self.rt.timers.schedule(("join", group.group_id), self.rt.now_ms + group.rebalance_timeout_ms)
        elif group.is_(COMPLETING):
            self.rt.timers.schedule(("sync", group.group_id), self.rt.now_ms + group.rebalance_timeout_ms)

    def rebalance(self, group: Group, reason: str) -> None:
        """Start a rebalance of a group that can have one (a consumer group just downgraded)."""
        self._maybe_prepare_rebalance(group, reason)

    # --- shared ------------------------------------------------------------------------------

    def validate_member(self, group: Group, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static member's instance id must map to this
        member id (else FENCED_INSTANCE_ID), and the member must exist."""
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: %s is fenced by %s", group.group_id, member_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        return None if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID

    def store_group(self, group: Group, assignment: dict[str, bytes], then: Continuation | None) -> None:
        value = encode_group_value(group.to_stored(assignment))
        self.rt.write(group.partition, [(encode_group_key(group.group_id), value)], then)

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.rt.timers.schedule(("heartbeat", group.group_id, member.member_id), self.rt.now_ms + timeout)

    def _reply_join(self, ticket: Ticket | None, result: JoinResult) -> None:
        if ticket is not None:
            self.rt.reply(ticket, result)
