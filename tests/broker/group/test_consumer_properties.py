"""The reconciliation invariants of KIP-848, as a hypothesis state machine over the sans-IO
coordinator and simulated consumers that join, heartbeat, revoke late, leave, and die:

- a partition never has two live owners (what the consumers themselves hold);
- a member's epoch never goes backwards, nor the group's or the target assignment's;
- while members are alive and keep heartbeating, every partition ends up owned;
- the group a coordinator rebuilds from the log is the live one.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tributary.broker.group.consumer_group import ConsumerGroupState
from tributary.protocol.error_codes import ErrorCode

from .consumer_harness import CONSUMER_CONFIG, ConsumerHarness, Member, topic_id

TOPICS = ("t", "u")


class Reconciliation(RuleBasedStateMachine):
    @initialize(t=st.integers(1, 12), u=st.integers(1, 6))
    def start(self, t: int, u: int) -> None:
        self.h = ConsumerHarness()
        self.sizes = {"t": t, "u": u}
        self.h.set_topics(self.sizes)
        self.live: list[Member] = []
        self.dead: list[Member] = []
        self.epochs: dict[str, int] = {}
        self.group_epochs = (0, 0)
        self.names = iter(f"m{i}" for i in range(10_000))

    # --- the consumers ----------------------------------------------------------------------

    def _heartbeat(self, member: Member, *, revoke: bool = True) -> None:
        epoch_before = member.epoch
        if revoke and member.lazy:
            member.revoke()
        result = member.heartbeat()
        if result.error == ErrorCode.NONE:
            # Within one incarnation (since its last join) the epoch never goes back.
            assert result.member_epoch >= epoch_before or epoch_before == 0, (epoch_before, result)
            self.epochs[member.member_id] = result.member_epoch
        else:
            assert result.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH), result

    @rule(subscription=st.sampled_from([("t",), ("u",), ("t", "u")]), lazy=st.booleans())
    def join(self, subscription: tuple[str, ...], lazy: bool) -> None:
        if len(self.live) >= 6:
            return
        member = Member(next(self.names), subscription, self.h, lazy=lazy)
        result = member.join()
        assert result.error == ErrorCode.NONE, result
        self.live.append(member)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), revoke=st.booleans())
    def heartbeat(self, data: st.DataObject, revoke: bool) -> None:
        member = data.draw(st.sampled_from(self.live))
        self._heartbeat(member, revoke=revoke)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(self.live))
        member.owned = {}  # a consumer revokes everything before it sends its leave
        assert member.leave().error in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID)
        self.live.remove(member)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        """kill -9: it stops; the coordinator notices when its session expires."""
        member = data.draw(st.sampled_from(self.live))
        self.live.remove(member)
        self.dead.append(member)

    @rule(ms=st.integers(100, 3000))
    def time_passes(self, ms: int) -> None:
        """Time goes by while every live consumer heartbeats (lazy ones without revoking)."""
        self.h.advance(ms)
        for member in list(self.live):
            self._heartbeat(member, revoke=False)

    @rule(topic=st.sampled_from(TOPICS), more=st.integers(1, 4))
    def add_partitions(self, topic: str, more: int) -> None:
        self.sizes[topic] += more
        self.h.set_topics(self.sizes)

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def never_two_owners(self) -> None:
        if not hasattr(self, "h"):
            return
        seen: dict[tuple[object, int], str] = {}
        for member in self.live:
            for topic, partitions in member.owned.items():
                for p in partitions:
                    assert (topic, p) not in seen, f"{topic}-{p} owned by {seen[topic, p]} and {member.member_id}"
                    seen[topic, p] = member.member_id

    @invariant()
    def group_epochs_move_forward(self) -> None:
        if not hasattr(self, "h") or "g" not in self.h.coordinator.consumers.groups:
            return
        group = self.h.group()
        epochs = (group.group_epoch, group.assignment_epoch)
        assert epochs >= self.group_epochs or epochs[0] >= self.group_epochs[0], (epochs, self.group_epochs)
        assert group.assignment_epoch <= group.group_epoch
        self.group_epochs = epochs

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        # The dead are fenced once their sessions expire; the living settle.
        for _ in range(CONSUMER_CONFIG.consumer_session_timeout_ms // 1000 + 2):
            self.time_passes(1000)
        for _ in range(8):
            for member in list(self.live):
                self._heartbeat(member)
        self.never_two_owners()
        if "g" not in self.h.coordinator.consumers.groups:
            return
        group = self.h.group()
        assert set(group.members) == {m.member_id for m in self.live}
        if self.live:
            assert group.state is ConsumerGroupState.STABLE, group
        subscribed = {t for m in self.live for t in m.topics}
        owned = {(t, p) for m in self.live for t, ps in m.owned.items() for p in ps}
        assert owned == {(topic_id(t), p) for t in subscribed for p in range(self.sizes[t])}
        # A coordinator taking over the partition rebuilds the same group from the log.
        fresh = ConsumerHarness()
        fresh.log = self.h.log
        fresh.load(group.partition)
        if self.live:
            loaded = fresh.group()
            assert loaded.members == group.members
            assert loaded.targets == group.targets
            assert loaded.partition_epochs == group.partition_epochs
            assert (loaded.group_epoch, loaded.assignment_epoch) == (group.group_epoch, group.assignment_epoch)


Reconciliation.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestReconciliation = Reconciliation.TestCase
