"""What a partition's leader knows about its replicas: the ISR and the high watermark.

Sans-IO: every input (a follower's fetch, the leader's own log end, the time) comes in as an
argument and every decision (a new high watermark, an ISR to propose) comes out as a value; the
replica manager does the I/O (writing the partition state znode, waking waiters). The rules are
Kafka's (``Partition.scala``, ``ReplicaState``):

- A follower's log end offset is the fetch offset of its latest Fetch: it asks for the next
  offset it lacks, so everything below is on it.
- A follower is *caught up* at time t when its log end equals the leader's, or it was caught up
  within ``replica.lag.time.max.ms``. "Was caught up" is tracked as Kafka does: a fetch at or past
  the leader's log end at that moment catches it up now; a fetch at or past what the leader's log
  end was at the follower's previous fetch catches it up as of that previous fetch.
- The ISR shrinks by the followers that are no longer caught up, and grows by a follower whose log
  end reached both the high watermark and the first offset of the leader's epoch (so a replica
  that has not yet got everything this leader committed never counts as in sync).
- The low watermark (DeleteRecords, KIP-107) is the smallest log start offset among the leader
  and its live followers, each follower's as its latest Fetch reported it.
- The high watermark is the smallest log end offset in the ISR, the leader's own included, and
  never moves back on a leader. A follower whose log end is not known yet (none fetched since this
  leader took over) holds it where it is. While an ISR change is being written, the high watermark
  is computed over the *maximal* ISR (KIP-497): the current one plus any replica being added, so a
  shrink takes effect only once written and an expansion already waits for the new member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: A follower whose log end the leader has not learnt yet.
UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    #: The leader's log end and the time at this follower's previous fetch.
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    #: The follower's log start offset, as its latest fetch reported it.
    log_start_offset: int = UNKNOWN_OFFSET
    #: The follower broker's registration (its broker epoch, KIP-380) when the leader counted it
    #: in sync: a new one means the broker restarted and may have lost what it had not fsynced.
    broker_epoch: int | None = None

    def fetched(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms

    def caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now_ms - self.last_caught_up_ms <= max_lag_ms


class LeaderState:
    """The leader's view of one partition, from the moment it became leader in `leader_epoch`."""

    def __init__(
        self,
        leader: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        leader_epoch: int,
        *,
        epoch_start_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        self.leader = leader
        self.replicas = tuple(replicas)
        #: The ISR as last written to (or read from) the partition state znode.
        self.isr: tuple[int, ...] = tuple(isr)
        self.leader_epoch = leader_epoch
        #: The leader's log end when it took over: a joining follower must have reached it.
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        #: An ISR written to ZooKeeper whose outcome is not known yet.
        self.pending_isr: tuple[int, ...] | None = None
        # Followers in the ISR start caught up now, as in Kafka, so a new leader does not
        # throw them out before they had the chance to fetch from it.
        self.followers = {
            replica: FollowerProgress(last_caught_up_ms=now_ms if replica in self.isr else 0)
            for replica in self.replicas
            if replica != leader
        }

    def set_replicas(self, replicas: Iterable[int]) -> None:
        """The assignment changed within this epoch (a reassignment seen before its epoch bump):
        new replicas start as followers not yet caught up, removed ones are forgotten."""
        self.replicas = tuple(replicas)
        for replica in self.replicas:
            if replica != self.leader and replica not in self.followers:
                self.followers[replica] = FollowerProgress(last_caught_up_ms=0)
        for replica in [r for r in self.followers if r not in self.replicas]:
            del self.followers[replica]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def follower_fetched(
        self,
        replica: int,
        fetch_offset: int,
        leader_leo: int,
        now_ms: int,
        leader_durable: int | None = None,
        *,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> bool:
        """Record a follower's fetch; True when the high watermark moved. `leader_durable`: what
        of the leader's own log counts for the high watermark, when not all of it (only what it
        has fsynced, under high.watermark.fsync). `log_start_offset`: the follower's, as its
        fetch said."""
        progress = self.followers.get(replica)
        if progress is None:
            return False
        progress.fetched(fetch_offset, leader_leo, now_ms)
        if log_start_offset >= 0:
            progress.log_start_offset = log_start_offset
        return self.update_high_watermark(leader_leo if leader_durable is None else leader_durable)

    def low_watermark(self, leader_start: int, live: frozenset[int]) -> int:
        """The smallest log start offset of the leader (`leader_start`) and its live followers;
        a live follower that has not reported one yet holds it at UNKNOWN_OFFSET (Kafka's rule:
        DeleteRecords waits until every live replica has dropped the records)."""
        starts = [p.log_start_offset for replica, p in self.followers.items() if replica in live]
        return min([leader_start, *starts])

    def update_high_watermark(self, leader_leo: int) -> bool:
        """Advance the high watermark to the smallest log end in the (maximal) ISR (the leader's
        counting as `leader_leo`); True if it moved."""
        ends = [leader_leo]
        for replica in self.maximal_isr:
            if replica == self.leader:
                continue
            progress = self.followers.get(replica)
            if progress is None or progress.log_end_offset == UNKNOWN_OFFSET:
                return False
            ends.append(progress.log_end_offset)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def proposed_isr(
        self,
        leader_leo: int,
        now_ms: int,
        max_lag_ms: int,
        live: frozenset[int],
        broker_epochs: Mapping[int, int] | None = None,
    ) -> tuple[int, ...] | None:
        """The ISR this leader should write now, or None when it should stay as it is.

        Shrinks by followers that fell behind, whose broker is gone, or whose broker registered
        again since it was counted in sync (`broker_epochs`: a restart, after which its log may
        lack what it had not fsynced, although it was caught up a moment ago: it must catch up
        again before it counts); grows by the followers that caught up (their registration is
        remembered then). The leader itself always stays. Nothing is proposed while a change is
        being written.
        """
        if self.pending_isr is not None:
            return None
        epochs = broker_epochs or {}
        keep = [self.leader]
        for replica in self.isr:
            if replica == self.leader:
                continue
            progress = self.followers.get(replica)
            if progress is None or replica not in live:
                continue
            registered = epochs.get(replica)
            if progress.broker_epoch is None:
                progress.broker_epoch = registered  # first seen by this leader
            elif registered is not None and registered != progress.broker_epoch:
                continue  # restarted since it was counted in sync
            if progress.caught_up(leader_leo, now_ms, max_lag_ms):
                keep.append(replica)
        for replica, progress in self.followers.items():
            if replica in keep or replica in self.isr or replica not in live:
                continue
            end = progress.log_end_offset
            if end >= self.high_watermark and end >= self.epoch_start_offset and end != UNKNOWN_OFFSET:
                progress.broker_epoch = epochs.get(replica)
                keep.append(replica)
        proposed = tuple(r for r in self.replicas if r in keep)
        if set(proposed) == set(self.isr):
            return None
        return proposed

    def isr_written(self, isr: tuple[int, ...]) -> None:
        self.isr = isr
        self.pending_isr = None

    def follower_lag(self, leader_leo: int) -> dict[int, int]:
        """Messages each follower is behind the leader's log end (unknown: the whole log end)."""
        return {replica: leader_leo - max(progress.log_end_offset, 0) for replica, progress in self.followers.items()}
