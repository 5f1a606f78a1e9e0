"""The classic group protocol, driven with a fake clock: no sockets, no trio."""

from __future__ import annotations

from tributary.broker.group.group import GroupState
from tributary.broker.group.membership import EMPTY_CONSUMER_ASSIGNMENT, NEW_MEMBER_JOIN_TIMEOUT_MS
from tributary.broker.group.records import GroupKey, decode_group_value, decode_key
from tributary.protocol.error_codes import ErrorCode

from .harness import CONFIG, REBALANCE, SESSION, Harness

DELAY = CONFIG.initial_rebalance_delay_ms


def state(h: Harness, group: str = "g") -> str:
    return h.coordinator.describe(group).state


def stored_groups(h: Harness, partition: int | None = None) -> list[tuple[str, bytes | None]]:
    """The group metadata records written, in order."""
    partition = h.coordinator.partition_for("g") if partition is None else partition
    out = []
    for key, value in h.log[partition]:
        decoded = decode_key(key)
        if isinstance(decoded, GroupKey):
            out.append((decoded.group, value))
    return out


# --- joining ---------------------------------------------------------------------------------


def test_member_id_required_then_join_sync_and_stable() -> None:
    h = Harness()
    first = h.join_result(h.join(client_id="app"))
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id == "app-1"
    assert first.generation_id == -1
    assert state(h) == "Empty"

    ticket = h.join("app-1", client_id="app")
    assert h.pending(ticket)
    assert state(h) == "PreparingRebalance"
    h.advance(DELAY - 1)
    assert h.pending(ticket), "the first rebalance waits the initial delay"
    h.advance(1)
    joined = h.join_result(ticket)
    assert joined.error == ErrorCode.NONE
    assert (joined.member_id, joined.generation_id, joined.leader) == ("app-1", 1, "app-1")
    assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in joined.members] == [("app-1", b"range-meta")]
    assert state(h) == "CompletingRebalance"

    synced = h.sync_result(h.sync("app-1", 1, {"app-1": b"mine"}))
    assert synced.error == ErrorCode.NONE
    assert synced.assignment == b"mine"
    assert state(h) == "Stable"
    assert h.heartbeat("app-1", 1) == ErrorCode.NONE
    # The assignment is in the log before anyone gets it.
    (_group, value), *_ = stored_groups(h)
    assert value is not None and decode_group_value(value).members[0].assignment == b"mine"


def test_join_without_member_id_required_joins_at_once() -> None:
    h = Harness()
    ticket = h.join(require_known=False)
    h.advance(DELAY)
    result = h.join_result(ticket)
    assert result.error == ErrorCode.NONE and result.member_id == "client-1"


def test_pending_member_id_is_forgotten_after_the_session_timeout() -> None:
    h = Harness()
    member = h.new_member()
    h.advance(SESSION)
    late = h.join_result(h.join(member))
    assert late.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_pending_member_holds_up_the_rebalance_until_it_joins() -> None:
    h = Harness()
    (a,), generation = h.form_group(1)
    b = h.new_member()
    leader_rejoin = h.join(a)  # the leader asks for a rebalance
    assert h.pending(leader_rejoin), "b was handed a member id: the rebalance waits for it"
    b_join = h.join(b)
    assert h.join_result(leader_rejoin).generation_id == generation + 1
    assert h.join_result(b_join).generation_id == generation + 1
    assert {m.member_id for m in h.join_result(leader_rejoin).members} == {a, b}


def test_initial_delay_is_extended_while_newcomers_arrive() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    ta = h.join(a)
    h.advance(DELAY - 1000)
    tb = h.join(b)
    h.advance(1000)  # first delay over, but b arrived during it: wait again
    assert h.pending(ta) and h.pending(tb)
    h.advance(DELAY - 1)
    assert h.pending(ta)
    h.advance(1)
    assert h.join_result(ta).generation_id == h.join_result(tb).generation_id == 1


def test_initial_delay_never_exceeds_the_rebalance_timeout() -> None:
    h = Harness()
    first = h.join(h.new_member(), rebalance=4000)
    h.advance(DELAY - 1)
    h.join(h.new_member(), rebalance=4000)
    h.advance(1000)
    third = h.join(h.new_member(), rebalance=4000)
    # Newcomers keep arriving, but the extension is cut to what is left of the 4 s
    # rebalance timeout, and then there is no more.
    h.advance(4000 - (DELAY - 1) - 1000 - 1)
    assert h.pending(first)
    h.advance(1)
    assert h.join_result(first).error == ErrorCode.NONE
    assert len(h.join_result(first).members) == 3
    assert h.join_result(third).generation_id == 1


def test_invalid_session_timeout() -> None:
    h = Harness()
    for session in (CONFIG.min_session_timeout_ms - 1, CONFIG.max_session_timeout_ms + 1):
        result = h.join_result(h.join(session=session))
        assert result.error == ErrorCode.INVALID_SESSION_TIMEOUT


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    h.form_group(1)
    other = h.join_result(h.join(protocols=(("sticky", b""),)))
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    connect = h.join_result(h.join(protocol_type="connect"))
    assert connect.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    empty = h.join_result(h.join(group="h", protocols=()))
    assert empty.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_is_chosen_by_vote_among_those_all_support() -> None:
    h = Harness()
    prefs = [
        (("range", b"r1"), ("roundrobin", b"o1")),
        (("roundrobin", b"o2"), ("range", b"r2")),
        (("roundrobin", b"o3"), ("range", b"r3"), ("sticky", b"s3")),
    ]
    ids = [h.new_member(protocols=p) for p in prefs]
    tickets = [h.join(m, protocols=p) for m, p in zip(ids, prefs, strict=True)]
    h.advance(2 * DELAY)
    results = [h.join_result(t) for t in tickets]
    assert {r.protocol_name for r in results} == {"roundrobin"}
    leader = results[0]
    assert leader.leader == ids[0], "the first member to join leads"
    assert [(m.member_id, m.metadata) for m in leader.members] == list(zip(ids, [b"o1", b"o2", b"o3"], strict=True))
    assert results[1].members == () and results[2].members == ()


def test_a_second_join_while_the_first_waits_answers_the_first() -> None:
    h = Harness()
    member = h.new_member()
    first = h.join(member)
    second = h.join(member)
    assert h.join_result(first).error == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(DELAY)
    assert h.join_result(second).error == ErrorCode.NONE


def test_follower_rejoining_a_stable_group_unchanged_gets_the_current_generation() -> None:
    h = Harness()
    (_a, b), generation = h.form_group(2)
    again = h.join_result(h.join(b))
    assert again.error == ErrorCode.NONE and again.generation_id == generation and again.members == ()
    assert state(h) == "Stable"


# --- liveness ---------------------------------------------------------------------------------


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    h.advance(SESSION // 2)
    assert h.heartbeat(a, generation) == ErrorCode.NONE
    h.advance(SESSION // 2)
    # b sent nothing for a whole session timeout: gone.
    assert h.heartbeat(a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    rejoin = h.join_result(h.join(a))  # everyone left has rejoined: completes at once
    assert (rejoin.generation_id, rejoin.leader) == (generation + 1, a)
    assert [m.member_id for m in rejoin.members] == [a]


def test_heartbeats_keep_members_alive_indefinitely() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    for _ in range(20):
        h.advance(SESSION - 1)
        assert h.heartbeat(a, generation) == ErrorCode.NONE
        assert h.heartbeat(b, generation) == ErrorCode.NONE
    assert state(h) == "Stable"


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    (a, b, c), generation = h.form_group(3)
    ta = h.join(a)  # the leader rejoins: rebalance
    tb = h.join(b)
    for _ in range(REBALANCE // (SESSION // 2)):
        h.advance(SESSION // 2)
        # c stays alive but ignores the hint to rejoin.
        if state(h) == "PreparingRebalance":
            assert h.heartbeat(c, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    result = h.join_result(ta)
    assert result.generation_id == generation + 1
    assert {m.member_id for m in result.members} == {a, b}
    assert h.join_result(tb).error == ErrorCode.NONE
    assert h.heartbeat(c, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_members_waiting_in_join_do_not_expire() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    ta = h.join(a)
    for _ in range(4):  # a waits in JoinGroup longer than its session: fine
        h.advance(SESSION // 2)
        assert h.heartbeat(b, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    tb = h.join(b)
    assert h.join_result(ta).generation_id == generation + 1
    assert h.join_result(tb).generation_id == generation + 1


def test_new_member_that_never_completes_a_join_is_dropped() -> None:
    h = Harness()
    (a,), generation = h.form_group(1, rebalance=NEW_MEMBER_JOIN_TIMEOUT_MS * 2)
    newcomer = h.join(h.new_member(rebalance=NEW_MEMBER_JOIN_TIMEOUT_MS * 2), rebalance=NEW_MEMBER_JOIN_TIMEOUT_MS * 2)
    # a never rejoins; only heartbeats. The newcomer's JoinGroup times out first.
    while h.pending(newcomer):
        h.advance(SESSION // 2)
        h.heartbeat(a, generation)
    assert h.join_result(newcomer).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.now - 1_000_000 <= NEW_MEMBER_JOIN_TIMEOUT_MS + 2 * DELAY + SESSION


# --- leaving and leaders -------------------------------------------------------------------


def test_leave_rebalances_and_the_next_member_leads() -> None:
    h = Harness()
    (a, b, c), generation = h.form_group(3)
    result = h.leave(a)
    assert result.error == ErrorCode.NONE and result.members[0][1] == ErrorCode.NONE
    assert h.heartbeat(b, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    tb, tc = h.join(b), h.join(c)
    rb = h.join_result(tb)
    assert rb.generation_id == generation + 1 and rb.leader == b
    assert h.join_result(tc).leader == b


def test_leader_leaving_mid_rebalance() -> None:
    h = Harness()
    (a, b, c), generation = h.form_group(3)
    tc = h.join(c, protocols=(("range", b"new-subscription"),))  # c changed its subscription
    ta = h.join(a)
    assert h.pending(ta)
    h.leave(a)  # the leader leaves while the rebalance waits for b
    assert h.join_result(ta).error == ErrorCode.UNKNOWN_MEMBER_ID
    tb = h.join(b)
    rb, rc = h.join_result(tb), h.join_result(tc)
    assert rb.generation_id == rc.generation_id == generation + 1
    # b is the first remaining member in join order
    assert rc.leader == b and rb.members and not rc.members
    assert dict((m.member_id, m.metadata) for m in rb.members) == {b: b"range-meta", c: b"new-subscription"}


def test_leader_that_does_not_rejoin_is_replaced_by_a_member_that_did() -> None:
    h = Harness()
    (_a, b, c), generation = h.form_group(3)
    tc = h.join(c, protocols=(("range", b"changed"),))
    tb = h.join(b)
    h.advance(REBALANCE)
    rc = h.join_result(tc)
    assert rc.generation_id == generation + 1
    assert rc.leader == h.join_result(tb).leader
    assert rc.leader in (b, c)
    assert {m.member_id for m in h.join_result(tb if rc.leader == b else tc).members} == {b, c}


def test_leave_unknown_members_and_pending_members() -> None:
    h = Harness()
    (_a,), _generation = h.form_group(1)
    pending = h.new_member()
    result = h.leave(pending, "nobody", group="g")
    assert [e for _, e in result.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.leave("x", group="unknown-group").members[0][1] == ErrorCode.UNKNOWN_MEMBER_ID


def test_everyone_leaving_empties_the_group_and_records_it() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    h.leave(a, b)
    assert state(h) == "Empty"
    *_, (_group, value) = stored_groups(h)
    assert value is not None
    stored = decode_group_value(value)
    assert stored.generation == generation + 1 and stored.members == ()


# --- late joiners and syncing ------------------------------------------------------------------


def test_late_joiner_triggers_a_rebalance_of_the_stable_group() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    c = h.new_member()
    tc = h.join(c)
    assert state(h) == "PreparingRebalance"
    assert h.heartbeat(a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    # Commits of the old generation are still accepted while preparing.
    assert h.commit_errors(h.commit({("t", 0): 5}, member_id=a, generation=generation)) == {("t", 0): ErrorCode.NONE}
    ta, tb = h.join(a), h.join(b)
    results = [h.join_result(t) for t in (ta, tb, tc)]
    assert {r.generation_id for r in results} == {generation + 1}
    assert {m.member_id for m in results[0].members} == {a, b, c}


def test_late_joiner_while_completing_sends_waiting_syncs_back() -> None:
    h = Harness()
    a, b, generation = h.two_joined()
    follower_sync = h.sync(b, generation)
    assert h.pending(follower_sync)
    assert h.heartbeat(b, generation) == ErrorCode.NONE  # CompletingRebalance: heartbeats are fine
    h.join(h.new_member())
    assert h.sync_result(follower_sync).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.sync_result(h.sync(a, generation, {a: b"x"})).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_followers_wait_for_the_leaders_assignment() -> None:
    h = Harness()
    a, b, c = h.new_member(), h.new_member(), h.new_member()
    tickets = [h.join(m) for m in (a, b, c)]
    h.advance(2 * DELAY)
    generation = h.join_result(tickets[0]).generation_id
    sb, sc = h.sync(b, generation), h.sync(c, generation)
    assert h.pending(sb) and h.pending(sc)
    # The leader assigns nothing to c: c gets an empty consumer assignment, not zero bytes.
    sa = h.sync(a, generation, {a: b"for-a", b: b"for-b"})
    assert h.sync_result(sa).assignment == b"for-a"
    assert h.sync_result(sb).assignment == b"for-b"
    assert h.sync_result(sc).assignment == EMPTY_CONSUMER_ASSIGNMENT
    assert EMPTY_CONSUMER_ASSIGNMENT == b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
    assert h.sync_result(sc).protocol_name == "range"
    # A member syncing again in the Stable group gets its assignment at once.
    assert h.sync_result(h.sync(b, generation)).assignment == b"for-b"


def test_members_that_never_sync_are_removed() -> None:
    h = Harness()
    a, b, generation = h.two_joined()
    sb = h.sync(b, generation)
    for _ in range(REBALANCE // (SESSION // 2) + 1):
        h.advance(SESSION // 2)
        h.heartbeat(b, generation)
    # The leader a never sent its SyncGroup within the rebalance timeout.
    assert h.sync_result(sb).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(a, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    rejoin = h.join_result(h.join(b))
    assert rejoin.generation_id == generation + 1 and rejoin.leader == b


def test_sync_errors() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    assert h.sync_result(h.sync(a, generation + 1)).error == ErrorCode.ILLEGAL_GENERATION
    assert h.sync_result(h.sync("who", generation)).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync_result(h.sync(a, generation, group="nope")).error == ErrorCode.UNKNOWN_MEMBER_ID
    h.join(a)
    assert h.sync_result(h.sync(b, generation)).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_generation_checks() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    assert h.heartbeat(a, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("stranger", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group="other") == ErrorCode.UNKNOWN_MEMBER_ID
    errors = h.commit_errors(h.commit({("t", 0): 1}, member_id=a, generation=generation + 1))
    assert errors == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    errors = h.commit_errors(h.commit({("t", 0): 1}, member_id="stranger", generation=generation))
    assert errors == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # A commit without membership into a group that has members is refused too.
    assert h.commit_errors(h.commit({("t", 0): 1})) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # The old generation is refused once a new one exists.
    h.leave(b)
    ra = h.join_result(h.join(a))
    assert ra.generation_id == generation + 1
    errors = h.commit_errors(h.commit({("t", 0): 1}, member_id=a, generation=generation))
    assert errors == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    # Between JoinGroup and the assignment, commits wait for the rebalance.
    errors = h.commit_errors(h.commit({("t", 0): 1}, member_id=a, generation=ra.generation_id))
    assert errors == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_storing_the_assignment_fails() -> None:
    h = Harness()
    a, b, generation = h.two_joined()
    sb = h.sync(b, generation)
    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    sa = h.sync(a, generation, {a: b"x", b: b"y"})
    assert h.sync_result(sa).error == ErrorCode.NOT_COORDINATOR
    assert h.sync_result(sb).error == ErrorCode.NOT_COORDINATOR
    assert state(h) == "PreparingRebalance"


def test_assignment_reaches_members_only_once_written() -> None:
    h = Harness()
    (a,), _ = h.form_group(1)
    h.hold_writes = True
    ta = h.join(a)  # single member: completes at once
    generation = h.join_result(ta).generation_id
    sa = h.sync(a, generation, {a: b"z"})
    assert h.pending(sa)
    h.release_writes()
    assert h.sync_result(sa).assignment == b"z"


# --- static membership --------------------------------------------------------------------------


def form_static_group(h: Harness, instances: list[str]) -> tuple[dict[str, str], int]:
    tickets = {i: h.join(instance=i, client_id=f"c-{i}") for i in instances}
    h.advance(len(instances) * DELAY)
    members = {i: h.join_result(t).member_id for i, t in tickets.items()}
    results = [h.join_result(t) for t in tickets.values()]
    generation, leader = results[0].generation_id, results[0].leader
    for i, member in members.items():
        assignments = {m: f"asg-{j}".encode() for j, m in members.items()} if member == leader else None
        assert h.sync_result(h.sync(member, generation, assignments, instance=i)).error == ErrorCode.NONE
    return members, generation


def test_static_members_join_without_member_id_required() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1", "i2"])
    assert members == {"i1": "i1-1", "i2": "i2-2"}
    assert generation == 1


def test_static_member_rejoin_takes_over_without_rebalance() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1", "i2"])
    old = members["i2"]
    rejoined = h.join_result(h.join(instance="i2", client_id="c-i2"))
    assert rejoined.error == ErrorCode.NONE
    assert rejoined.member_id != old
    assert rejoined.generation_id == generation
    assert rejoined.leader == members["i1"] and rejoined.members == ()
    assert state(h) == "Stable"
    # Its place, with its assignment, is the new id's; the old incarnation is fenced.
    synced = h.sync_result(h.sync(rejoined.member_id, generation, instance="i2"))
    assert synced.assignment == b"asg-i2"
    assert h.heartbeat(old, generation, instance="i2") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(rejoined.member_id, generation, instance="i2") == ErrorCode.NONE
    # And the new member id is persisted, so a failover keeps it.
    *_, (_, value) = stored_groups(h)
    assert value is not None
    assert {m.member_id for m in decode_group_value(value).members} == {members["i1"], rejoined.member_id}


def test_static_leader_rejoining_is_not_told_it_leads() -> None:
    h = Harness()
    members, _generation = form_static_group(h, ["i1", "i2"])
    rejoined = h.join_result(h.join(instance="i1", client_id="c-i1"))
    # The group's leader is now the new id, but the answer names the old one, so the
    # member does not compute an assignment that a Stable group would not hand out.
    assert rejoined.leader == members["i1"] != rejoined.member_id
    assert h.coordinator.groups["g"].leader_id == rejoined.member_id


def test_static_member_rejoin_with_new_protocols_rebalances() -> None:
    h = Harness()
    _members, generation = form_static_group(h, ["i1"])
    ticket = h.join(instance="i1", protocols=(("roundrobin", b""), ("range", b"")))
    result = h.join_result(ticket)  # alone in the group: the rebalance completes at once
    assert result.generation_id == generation + 1 and result.protocol_name == "roundrobin"


def test_static_member_is_kept_through_a_rebalance_until_its_session_ends() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1", "i2"])
    ta = h.join(members["i1"], instance="i1")  # the leader asks for a rebalance
    for _ in range(REBALANCE // (SESSION // 2) - 1):
        h.advance(SESSION // 2)
        assert h.heartbeat(members["i2"], generation, instance="i2") == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(SESSION // 2)
    result = h.join_result(ta)
    # i2 did not rejoin but, being static, is still a member of the new generation.
    assert result.generation_id == generation + 1
    assert {m.member_id for m in result.members} == set(members.values())
    h.advance(SESSION)
    assert members["i2"] not in h.coordinator.groups["g"].members


def test_fenced_and_unknown_instances() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1"])
    assert h.heartbeat(members["i1"], generation, instance="nope") == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.join_result(h.join("i1-999", instance="i1")).error == ErrorCode.FENCED_INSTANCE_ID
    errors = h.commit_errors(h.commit({("t", 0): 1}, member_id="x", generation=generation, instance="i1"))
    assert errors == {("t", 0): ErrorCode.FENCED_INSTANCE_ID}
    # An administrator removes a static member by its instance id alone.
    assert h.leave(("", "i1")).members[0][1] == ErrorCode.NONE
    assert state(h) == "Empty"


def test_old_incarnation_waiting_in_join_is_fenced() -> None:
    h = Harness()
    members, _generation = form_static_group(h, ["i1", "i2"])
    waiting = h.join(members["i2"], instance="i2", protocols=(("range", b"other"),))
    assert h.pending(waiting)
    h.join(instance="i2")
    assert h.join_result(waiting).error == ErrorCode.FENCED_INSTANCE_ID


# --- coordinator ownership ------------------------------------------------------------------------


def test_groups_of_partitions_not_led_here_get_not_coordinator() -> None:
    h = Harness(load=False)
    result = h.join_result(h.join())
    assert result.error == ErrorCode.NOT_COORDINATOR
    assert h.heartbeat("m", 1) == ErrorCode.NOT_COORDINATOR
    assert h.coordinator.describe("g").error == ErrorCode.NOT_COORDINATOR
    assert h.coordinator.fetch_offsets("g", None).error == ErrorCode.NOT_COORDINATOR
    assert h.commit_errors(h.commit({("t", 0): 1})) == {("t", 0): ErrorCode.NOT_COORDINATOR}


def test_loading_partition_answers_load_in_progress() -> None:
    h = Harness(load=False)
    partition = h.coordinator.partition_for("g")
    token = h.coordinator.begin_loading(partition)
    assert h.join_result(h.join()).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("m", 1) == ErrorCode.NONE  # as Kafka: answered blindly while loading
    assert h.sync_result(h.sync("m", 1)).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.coordinator.fetch_offsets("g", None).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.list_groups()[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.apply(h.coordinator.finish_loading(h.now, partition, token, []))
    assert h.join_result(h.join()).error == ErrorCode.MEMBER_ID_REQUIRED


def test_stale_load_is_ignored() -> None:
    h = Harness(load=False)
    partition = h.coordinator.partition_for("g")
    old = h.coordinator.begin_loading(partition)
    h.apply(h.coordinator.unload(h.now, partition))
    new = h.coordinator.begin_loading(partition)
    h.apply(h.coordinator.finish_loading(h.now, partition, old, []))
    assert h.coordinator.is_loading(partition)
    h.apply(h.coordinator.finish_loading(h.now, partition, new, []))
    assert not h.coordinator.is_loading(partition)


def test_unloading_answers_everyone_waiting() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    ta = h.join(a)
    h.apply(h.coordinator.unload(h.now, h.coordinator.partition_for("g")))
    assert h.join_result(ta).error == ErrorCode.NOT_COORDINATOR
    assert h.heartbeat(b, generation) == ErrorCode.NOT_COORDINATOR
    assert h.coordinator.next_deadline() is not None  # only the offsets expiry timer is left
    assert len(h.coordinator.rt.timers) == 1


def test_describe_and_list() -> None:
    h = Harness()
    (a, b), _generation = h.form_group(2)
    summary = h.coordinator.describe("g")
    assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in summary.members] == [
        (a, b"range-meta", b"a-" + a.encode()),
        (b, b"range-meta", b"a-" + b.encode()),
    ]
    assert summary.members[0].client_host == "/127.0.0.1"
    h.join(a)
    preparing = h.coordinator.describe("g")
    assert preparing.state == "PreparingRebalance" and preparing.protocol == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in preparing.members)
    assert h.coordinator.describe("unknown").state == "Dead"
    error, groups = h.coordinator.list_groups()
    assert error == ErrorCode.NONE
    assert [(g.group_id, g.protocol_type, g.state) for g in groups] == [("g", "consumer", "PreparingRebalance")]
    assert GroupState.DEAD.value == "Dead"


def test_static_rejoin_is_undone_when_it_cannot_be_stored() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1", "i2"])
    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = h.join_result(h.join(instance="i2"))
    assert result.error == ErrorCode.NOT_COORDINATOR and result.member_id == ""
    h.write_error = None
    # The old incarnation is still the member.
    assert h.heartbeat(members["i2"], generation, instance="i2") == ErrorCode.NONE
    assert set(h.coordinator.groups["g"].members) == set(members.values())


def test_static_rejoin_answered_once_when_a_rebalance_overtakes_its_write() -> None:
    h = Harness()
    members, generation = form_static_group(h, ["i1", "i2"])
    h.hold_writes = True
    ticket = h.join(instance="i2")
    h.join(members["i1"], instance="i1")  # the leader rebalances while the write is pending
    assert h.join_result(ticket).generation_id == generation + 1
    h.release_writes()  # no second answer (the harness would fail on one)
    assert h.join_result(ticket).generation_id == generation + 1
