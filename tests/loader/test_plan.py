"""The plan as a pure function: ranges, splitting, gaps, new partitions; options; topic names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tributary.loader.errors import LoadError
from tributary.loader.naming import split_topic
from tributary.loader.options import load_options
from tributary.loader.plan import Gap, Plan, Range, make_plan, split_range
from tributary.loader.stage import resolve_writer


def plan(committed: dict[str, dict[int, int]], bounds: dict[str, dict[int, tuple[int, int]]], **kw: object) -> Plan:
    args: dict[str, object] = {
        "run": "00000002",
        "previous": "00000001",
        "topics": ".*",
        "committed": committed,
        "bounds": bounds,
        "allow_gaps": False,
        "max_records_per_range": {t: 100 for t in bounds},
        "now": 0.0,
    }
    args.update(kw)
    return make_plan(**args)  # type: ignore[arg-type]


def test_split_range_covers_the_range_in_bounded_near_equal_pieces() -> None:
    pieces = split_range("t", 0, 10, 261, 100)
    assert [(r.start, r.end) for r in pieces] == [(10, 93), (93, 177), (177, 261)]
    assert split_range("t", 0, 5, 6, 100) == [Range("t", 0, 5, 6)]


def test_ranges_run_from_the_commit_to_the_frozen_end() -> None:
    p = plan({"a.x": {0: 50, 1: 10}, "gone": {0: 7}}, {"a.x": {0: (0, 120), 1: (0, 10)}})
    assert p.ranges == (Range("a.x", 0, 50, 120),)  # partition 1 is done
    hot = plan({"a.x": {0: 50}}, {"a.x": {0: (0, 350)}})
    assert sorted(hot.ranges) == split_range("a.x", 0, 50, 350, 100) and len(hot.ranges) == 3
    # Every partition's offset is committed, including topics this run did not look at.
    assert p.end_offsets == {"a.x": {0: 120, 1: 10}, "gone": {0: 7}}
    assert Plan.from_json(p.to_json()) == p


def test_first_run_starts_at_the_earliest_later_new_partitions_at_zero() -> None:
    first = plan({}, {"t": {0: (40, 60)}}, previous=None, run="00000001")
    assert first.ranges == (Range("t", 0, 40, 60),) and first.gaps == ()
    with pytest.raises(LoadError, match=r"retention deleted 40 records that were never loaded: t-0 offsets \[0, 40\)"):
        plan({"other": {0: 1}}, {"t": {0: (40, 60)}})


def test_gaps_fail_the_plan_or_are_recorded() -> None:
    bounds = {"east.a": {0: (500, 900), 1: (0, 10)}}
    with pytest.raises(LoadError) as caught:
        plan({"east.a": {0: 200, 1: 10}}, bounds)
    assert "east.a-0 offsets [200, 500)" in str(caught.value) and "--allow-gaps" in str(caught.value)
    p = plan({"east.a": {0: 200, 1: 10}}, bounds, allow_gaps=True, max_records_per_range={"east.a": 1000})
    assert p.gaps == (Gap("east.a", 0, 200, 500),)
    assert p.ranges == (Range("east.a", 0, 500, 900),)


def test_an_offset_past_the_log_end_is_refused() -> None:
    with pytest.raises(LoadError, match="committed offset 90 is past the log end 20"):
        plan({"t": {0: 90}}, {"t": {0: (0, 20)}}, allow_gaps=True)


def test_topic_names_give_the_source() -> None:
    assert split_topic("east.clicks") == ("east", "clicks")
    assert split_topic("east.web.clicks") == ("east", "web.clicks")
    assert split_topic("clicks") == (None, "clicks")
    assert split_topic(".x") == (None, ".x")


def test_options_from_flags_and_toml(tmp_path: Path) -> None:
    config = tmp_path / "load.toml"
    config.write_text(
        'bootstrap = "h:1"\noutput = "/data/wh"\nmax_records_per_task = 5\nallow-gaps = true\n'
        'metrics-file = "m.prom"\ntopics = "east\\\\..*"\n'
    )
    options = load_options({"bootstrap": "h:2", "master": None}, config)
    assert options.bootstrap == "h:2"  # the flag wins
    assert options.output == "file:///data/wh"
    assert options.max_records_per_task == 5 and options.allow_gaps is True
    assert options.metrics_file == tmp_path / "m.prom"
    assert options.topic_pattern.fullmatch("east.x")
    assert options.master is None
    assert options.writer == "auto"
    assert load_options({"bootstrap": "h:1", "output": "/x", "writer": "spark"}).writer == "spark"


def test_the_auto_writer_is_pyarrow_for_local_files_only() -> None:
    assert resolve_writer("auto", "file:///data/wh") == "arrow"
    assert resolve_writer("auto", "hdfs://nn:8020/wh") == "spark"
    assert resolve_writer("arrow", "hdfs://nn:8020/wh") == "arrow"
    assert resolve_writer("spark", "file:///data/wh") == "spark"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"output": "file:///x"}, "setting 'bootstrap' is missing"),
        ({"bootstrap": "h:1", "output": "relative/dir"}, "must be a Hadoop FileSystem URI"),
        ({"bootstrap": "h:1", "output": "/x", "topics": "("}, "not a valid regex"),
        ({"bootstrap": "h:1", "output": "/x", "max-records-per-task": 0}, "positive integer"),
        ({"bootstrap": "h:1", "output": "/x", "nonsense": 1}, "unknown setting 'nonsense'"),
        ({"bootstrap": "h:1", "output": "/x", "writer": "fast"}, "'writer' must be one of auto, arrow, spark"),
    ],
)
def test_bad_options_are_named(flags: dict[str, object], message: str) -> None:
    with pytest.raises(LoadError, match=message):
        load_options(flags)
