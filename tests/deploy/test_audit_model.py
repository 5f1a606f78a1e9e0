"""The audit's arithmetic and verdicts (deploy/audit/model.py), without a cluster."""

from __future__ import annotations

from tributary.deploy.audit.model import HOUR_MS, PartitionIndex, Stream, Verdict, audit, hours, settled

H0 = 1_764_000_000_000 - 1_764_000_000_000 % HOUR_MS
H1, H2, H3 = H0 + HOUR_MS, H0 + 2 * HOUR_MS, H0 + 3 * HOUR_MS
BOUNDARIES = (H0, H1, H2, H3)


def index(at: tuple[int, int, int, int], log_start: int = 0, log_end: int | None = None) -> PartitionIndex:
    """A partition whose hours start at offsets ``at[0..2]`` and whose window ends at ``at[3]``."""
    return PartitionIndex(BOUNDARIES, at, log_start, at[-1] if log_end is None else log_end)


def stream(**changes: object) -> Stream:
    """Two partitions, 10 + 20 + 30 records per hour each, mirrored and loaded in full."""
    s = Stream("east", "clicks")
    for n in (0, 1):
        s.source[n] = index((0, 10, 30, 60))
        s.aggregate[n] = index((0, 10, 30, 60))
        s.checkpoints[n] = 60
        s.loaded_up_to[n] = 60
    s.hadoop = {H0: 20, H1: 40, H2: 60}
    for key, value in changes.items():
        setattr(s, key, value)
    return s


def verdicts(s: Stream) -> dict[int, Verdict]:
    return {row.hour: row.verdict for row in audit([s])}


def test_hours_cover_the_window_in_whole_hours() -> None:
    assert hours(H0 + 5, H2) == [H0, H1]
    assert hours(H0, H0) == []
    assert hours(H0 + 1, H0 + 2) == [H0]


def test_counts_per_hour_and_below_a_position() -> None:
    i = index((5, 10, 30, 60), log_start=5)
    assert i.counts() == {H0: 5, H1: 20, H2: 30}
    assert i.counts(below=25) == {H0: 5, H1: 15, H2: 0}
    assert i.counts(below=0) == {H0: 0, H1: 0, H2: 0}


def test_everything_agrees() -> None:
    rows = audit([stream()])
    assert [(r.hour, r.source, r.mirrored, r.aggregate, r.hadoop) for r in rows] == [
        (H0, 20, 20, 20, 20),
        (H1, 40, 40, 40, 40),
        (H2, 60, 60, 60, 60),
    ]
    assert all(r.verdict is Verdict.OK for r in rows)
    assert settled(rows)


def test_a_mirror_behind_is_in_flight_for_the_hours_it_has_not_copied() -> None:
    s = stream()
    for n in (0, 1):
        s.aggregate[n] = index((0, 10, 25, 25))
        s.checkpoints[n] = 25
        s.loaded_up_to[n] = 25
    s.hadoop = {H0: 20, H1: 30}
    assert verdicts(s) == {H0: Verdict.OK, H1: Verdict.IN_FLIGHT, H2: Verdict.IN_FLIGHT}
    assert settled(audit([s]))


def test_copied_but_not_yet_checkpointed_is_in_flight() -> None:
    s = stream(checkpoints={0: 55, 1: 60})
    assert verdicts(s)[H2] is Verdict.IN_FLIGHT


def test_records_missing_from_the_aggregate_are_a_mismatch() -> None:
    s = stream()
    s.aggregate[1] = index((0, 10, 29, 59))  # one record of hour 1 lost, the mirror says it copied it
    rows = {r.hour: r for r in audit([s])}
    assert rows[H1].verdict is Verdict.MISMATCH
    assert "holds 39 of the 40" in rows[H1].why
    assert not settled(list(rows.values()))


def test_aggregate_retention_explains_what_left_it() -> None:
    s = stream()
    for n in (0, 1):
        s.aggregate[n] = index((10, 10, 30, 60), log_start=10)  # hour 0 deleted by retention
    assert verdicts(s)[H0] is Verdict.RETENTION


def test_source_retention_after_mirroring_is_explained() -> None:
    s = stream()
    for n in (0, 1):
        s.source[n] = index((4, 10, 30, 60), log_start=4)
    assert verdicts(s)[H0] is Verdict.RETENTION


def test_an_hour_the_loader_has_not_reached_is_not_loaded_yet() -> None:
    s = stream(loaded_up_to={0: 30, 1: 30}, hadoop={H0: 20, H1: 40})
    assert verdicts(s) == {H0: Verdict.OK, H1: Verdict.OK, H2: Verdict.NOT_LOADED}


def test_records_missing_from_hadoop_after_a_commit_are_a_mismatch() -> None:
    s = stream(hadoop={H0: 20, H1: 39, H2: 60})
    assert verdicts(s)[H1] is Verdict.MISMATCH


def test_a_stream_no_load_covers_is_judged_up_to_the_aggregate() -> None:
    s = stream(loaded=False, hadoop={})
    rows = audit([s])
    assert {r.verdict for r in rows} == {Verdict.OK}
    assert {r.hadoop for r in rows} == {None}


def test_hours_without_records_are_left_out() -> None:
    s = stream()
    for n in (0, 1):
        s.source[n] = s.aggregate[n] = index((0, 0, 30, 60))
    s.hadoop = {H1: 60, H2: 60}
    assert [r.hour for r in audit([s])] == [H1, H2]
