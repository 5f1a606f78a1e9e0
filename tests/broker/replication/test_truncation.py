"""Divergent replicas reconciled to the new leader's log (KIP-101/279), on real logs on disk.

Each scenario builds two PartitionLogs batch by batch in given leader epochs, has the follower
ask the leader's epoch cache where its latest epoch ends (OffsetForLeaderEpoch), cut its log
where truncation_point says, and copy the rest with append_as_follower. Afterwards both logs
must hold the same bytes, and the leader-epoch caches the same entries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tributary.broker.log.config import LogConfig
from tributary.broker.log.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from tributary.broker.log.log import PartitionLog
from tributary.broker.replication.fetcher import truncation_point
from tributary.protocol.records import build_batch

NOW = 1_700_000_000_000


def batch(tag: str, count: int = 2) -> bytes:
    return build_batch((None, f"{tag}-{i}".encode(), (), NOW) for i in range(count))


def write(plog: PartitionLog, epochs: list[int], tag: str) -> None:
    for i, epoch in enumerate(epochs):
        plog.append(batch(f"{tag}{i}"), epoch, NOW)


def contents(plog: PartitionLog) -> bytes:
    with plog.read(plog.log_start_offset, 1 << 30, max_offset=plog.log_end_offset) as result:
        return result.read_bytes()


def reconcile(leader: PartitionLog, follower: PartitionLog) -> int:
    """What a follower's fetcher does after a leader change; the offset it cut to."""
    asked = follower.latest_epoch
    epoch, end = leader.end_offset_for_epoch(-1 if asked is None else asked)
    cut = truncation_point(epoch, end, follower.end_offset_for_epoch, follower.log_end_offset, follower.high_watermark)
    follower.truncate_to(cut)
    with leader.read(follower.log_end_offset, 1 << 30, max_offset=leader.log_end_offset) as result:
        missing = result.read_bytes()
    if missing:
        follower.append_as_follower(missing, NOW)
    return cut


@pytest.fixture
def logs(tmp_path: Path) -> tuple[PartitionLog, PartitionLog]:
    leader = PartitionLog.open(tmp_path / "leader", LogConfig())
    follower = PartitionLog.open(tmp_path / "follower", LogConfig())
    yield leader, follower
    leader.close()
    follower.close()


def test_an_old_leaders_unreplicated_tail_is_cut(logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    # Both had epochs 0 and 1. Then the follower led epoch 2 and wrote two batches nobody got;
    # the leader took over in epoch 3 and wrote its own.
    write(leader, [0, 0, 1, 1], "common")
    follower.append_as_follower(contents(leader), NOW)
    write(follower, [2, 2], "lost")
    write(leader, [3], "new")
    follower.high_watermark = 8
    assert reconcile(leader, follower) == 8  # where epoch 1 ends in the leader's log
    assert contents(follower) == contents(leader)
    assert follower.epochs.entries == leader.epochs.entries == [(0, 0), (1, 4), (3, 8)]


def test_a_follower_behind_in_the_same_epoch_keeps_everything(logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write(leader, [0, 0, 0], "a")
    follower.append_as_follower(contents(leader)[: len(batch("a0"))], NOW)
    assert reconcile(leader, follower) == 2  # nothing cut
    assert contents(follower) == contents(leader)


def test_a_follower_ahead_in_the_leaders_old_epoch_is_cut_to_where_the_leader_ends_it(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    leader, follower = logs
    # Epoch 1's leader wrote 3 batches; the follower got all three, the new leader (epoch 2)
    # only two before taking over.
    write(follower, [1, 1, 1], "x")
    leader.append_as_follower(contents(follower)[: 2 * len(batch("x0"))], NOW)
    leader.assign_leader_epoch(2)
    write(leader, [2], "y")
    assert reconcile(leader, follower) == 4
    assert contents(follower) == contents(leader)


def test_a_follower_whose_epoch_the_leader_never_saw_falls_back_to_where_the_leader_starts(
    logs: tuple[PartitionLog, PartitionLog],
) -> None:
    leader, follower = logs
    write(follower, [0, 0], "old")  # epoch 0 the new leader never had
    write(leader, [4, 4], "fresh")
    assert leader.end_offset_for_epoch(0) == (0, 0)
    assert reconcile(leader, follower) == 0
    assert contents(follower) == contents(leader)


def test_the_epoch_cache_survives_a_restart_and_is_rebuilt_when_lost(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "p", LogConfig())
    write(plog, [0, 3, 3, 7], "b")
    assert plog.epochs.entries == [(0, 0), (3, 2), (7, 6)]
    plog.close()
    again = PartitionLog.open(tmp_path / "p", LogConfig(), clean_shutdown=True)
    assert again.epochs.entries == [(0, 0), (3, 2), (7, 6)]
    assert again.end_offset_for_epoch(5) == (3, 6)
    again.close()
    (tmp_path / "p" / LEADER_EPOCH_CHECKPOINT).unlink()
    rebuilt = PartitionLog.open(tmp_path / "p", LogConfig(), clean_shutdown=True)
    assert rebuilt.epochs.entries == [(0, 0), (3, 2), (7, 6)]
    rebuilt.truncate_to(4)
    assert rebuilt.epochs.entries == [(0, 0), (3, 2)]
    assert LeaderEpochCache.load(tmp_path / "p" / LEADER_EPOCH_CHECKPOINT).entries == [(0, 0), (3, 2)]  # type: ignore[union-attr]
    rebuilt.close()


def test_a_follower_refuses_batches_that_do_not_follow_its_end(logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write(leader, [0, 0], "z")
    data = contents(leader)
    follower.append_as_follower(data, NOW)
    with pytest.raises(Exception, match="does not follow"):
        follower.append_as_follower(data, NOW)
    assert contents(follower) == data
    # A fetch may end inside a batch: the whole batches before it are appended, the rest waits.
    other = PartitionLog.open(follower.directory.parent / "third", LogConfig())
    assert other.append_as_follower(data[:-3], NOW).record_count == 2
    assert other.log_end_offset == 2
    other.close()


def test_epoch_cache_rules() -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in [(0, 0), (0, 5), (2, 10), (1, 12), (5, 20)]:
        cache.assign(epoch, start)
    assert cache.entries == [(0, 0), (2, 10), (5, 20)]  # older or equal epochs change nothing
    assert cache.end_offset_for(5, 30) == (5, 30)
    assert cache.end_offset_for(3, 30) == (2, 20)
    assert cache.end_offset_for(1, 30) == (0, 10)
    assert cache.end_offset_for(6, 30) == (-1, -1)
    cache.assign(6, 15)  # a newer epoch starting inside a cut-away part replaces what follows it
    assert cache.entries == [(0, 0), (2, 10), (6, 15)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12), (6, 15)]
    assert cache.end_offset_for(1, 30) == (1, 12)
    cache.truncate_from_end(15)
    assert cache.entries == [(2, 12)]


def test_an_empty_epoch_does_not_claim_an_older_epochs_data_copied_after_it() -> None:
    # This replica led epoch 5 from offset 100 but wrote nothing, then follows a leader whose
    # log holds epoch-4 data from 100 on (written by the epoch-4 leader, which it never got).
    cache = LeaderEpochCache(None, [(2, 0), (4, 60)])
    cache.assign(5, 100)
    cache.assign(4, 100)
    assert cache.entries == [(2, 0), (4, 60)]
    assert cache.end_offset_for(4, 130) == (4, 130)
