"""A model cluster driven by hypothesis: appends, follower fetches, ISR changes, kills, restarts
and elections in any order. Whatever happens, what was once committed (below a leader's high
watermark) stays in every later leader's log, at the same offsets, in the same epochs.

The model's logs are lists of leader epochs, one entry per offset (a batch of one record). The
rules under test are the real ones: the leader's ISR and high watermark (LeaderState), the
controller's clean election (elect_leader), the follower's truncation point (truncation_point)
and the leader-epoch cache's end offsets (LeaderEpochCache), which is what a follower asks a
leader with OffsetForLeaderEpoch.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tributary.broker.cluster.controller import elect_leader
from tributary.broker.cluster.model import NO_LEADER
from tributary.broker.cluster.znodes import LeaderAndIsr
from tributary.broker.log.epochs import LeaderEpochCache
from tributary.broker.replication.fetcher import truncation_point
from tributary.broker.replication.leader_state import LeaderState

REPLICAS = (1, 2, 3)
LAG_MS = 1_000


def epoch_cache(log: list[int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(None)
    for offset, epoch in enumerate(log):
        cache.assign(epoch, offset)
    return cache


class ReplicatedPartition(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.logs: dict[int, list[int]] = {r: [] for r in REPLICAS}
        self.hw: dict[int, int] = dict.fromkeys(REPLICAS, 0)
        self.alive = set(REPLICAS)
        self.needs_truncation: set[int] = set()
        # The partition state znode.
        self.zk = LeaderAndIsr(leader=1, leader_epoch=0, isr=REPLICAS, controller_epoch=1)
        self.leader_state: LeaderState | None = self._take_over(1)
        self.committed: list[int] = []

    def _take_over(self, leader: int) -> LeaderState:
        log = self.logs[leader]
        return LeaderState(
            leader, REPLICAS, self.zk.isr, self.zk.leader_epoch,
            epoch_start_offset=len(log), high_watermark=self.hw[leader], now_ms=self.now,
        )  # fmt: skip

    def _leader(self) -> int:
        return self.zk.leader

    def _note_committed(self) -> None:
        state = self.leader_state
        assert state is not None
        leader_log = self.logs[self._leader()]
        self.hw[self._leader()] = state.high_watermark
        if state.high_watermark > len(self.committed):
            self.committed = list(leader_log[: state.high_watermark])

    @rule(count=st.integers(1, 3))
    @precondition(lambda self: self.zk.leader != NO_LEADER)
    def append(self, count: int) -> None:
        leader = self._leader()
        self.logs[leader].extend([self.zk.leader_epoch] * count)
        assert self.leader_state is not None
        if self.leader_state.update_high_watermark(len(self.logs[leader])):
            self._note_committed()

    @rule(follower=st.sampled_from(REPLICAS), limit=st.integers(0, 4))
    @precondition(lambda self: self.zk.leader != NO_LEADER)
    def fetch(self, follower: int, limit: int) -> None:
        leader = self._leader()
        if follower == leader or follower not in self.alive or follower in self.needs_truncation:
            return
        state = self.leader_state
        assert state is not None
        log, leader_log = self.logs[follower], self.logs[leader]
        fetch_offset = len(log)
        if fetch_offset > len(leader_log):
            self.needs_truncation.add(follower)  # OFFSET_OUT_OF_RANGE: reconcile again
            return
        if state.follower_fetched(follower, fetch_offset, len(leader_log), self.now):
            self._note_committed()
        log.extend(leader_log[fetch_offset : fetch_offset + limit])
        self.hw[follower] = max(self.hw[follower], min(state.high_watermark, len(log)))

    @rule(follower=st.sampled_from(REPLICAS))
    @precondition(lambda self: self.zk.leader != NO_LEADER)
    def truncate(self, follower: int) -> None:
        if follower not in self.needs_truncation or follower not in self.alive:
            return
        log, leader_log = self.logs[follower], self.logs[self._leader()]
        latest = epoch_cache(log).latest_epoch
        asked = -1 if latest is None else latest
        leader_epoch, leader_end = epoch_cache(leader_log).end_offset_for(asked, len(leader_log))
        local = epoch_cache(log)
        cut = truncation_point(
            leader_epoch, leader_end, lambda e: local.end_offset_for(e, len(log)), len(log), self.hw[follower]
        )
        del log[cut:]
        self.hw[follower] = min(self.hw[follower], len(log))
        self.needs_truncation.discard(follower)

    @rule(ms=st.sampled_from([1, LAG_MS // 2, LAG_MS + 1]))
    @precondition(lambda self: self.zk.leader != NO_LEADER)
    def isr_upkeep(self, ms: int) -> None:
        self.now += ms
        state = self.leader_state
        assert state is not None
        proposed = state.proposed_isr(len(self.logs[self._leader()]), self.now, LAG_MS, frozenset(self.alive))
        if proposed is not None:
            state.isr_written(proposed)
            self.zk = LeaderAndIsr(self.zk.leader, self.zk.leader_epoch, proposed, self.zk.controller_epoch)
            if state.update_high_watermark(len(self.logs[self._leader()])):
                self._note_committed()

    @rule(broker=st.sampled_from(REPLICAS))
    def kill(self, broker: int) -> None:
        self.alive.discard(broker)
        self._elect()

    @rule(broker=st.sampled_from(REPLICAS))
    def restart(self, broker: int) -> None:
        if broker in self.alive:
            return
        self.alive.add(broker)
        self.needs_truncation.add(broker)
        self._elect()

    def _elect(self) -> None:
        decided = elect_leader(self.zk, REPLICAS, self.alive, 1)
        if decided is None:
            return
        self.zk = decided
        if decided.leader == NO_LEADER:
            self.leader_state = None
            return
        self.needs_truncation |= {r for r in REPLICAS if r != decided.leader and r in self.alive}
        self.needs_truncation.discard(decided.leader)
        self.leader_state = self._take_over(decided.leader)

    @invariant()
    def committed_prefix_is_in_the_leaders_log(self) -> None:
        if self.zk.leader == NO_LEADER:
            return
        leader_log = self.logs[self._leader()]
        assert leader_log[: len(self.committed)] == self.committed, (self.committed, self.logs, self.zk)

    @invariant()
    def every_in_sync_replica_holds_the_committed_prefix(self) -> None:
        for replica in self.zk.isr:
            log = self.logs[replica]
            assert log[: len(self.committed)] == self.committed, (replica, self.committed, self.logs, self.zk)


ReplicatedPartition.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
test_committed_prefix_never_changes = ReplicatedPartition.TestCase
