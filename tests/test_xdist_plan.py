"""The suite's plan for pytest-xdist (tests/fixtures/xdist.py) names files that exist."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.xdist import GROUPS, SECONDS, _split_scope

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_the_plan_names_exists() -> None:
    named = {*SECONDS, *(path for paths in GROUPS.values() for path in paths)}
    assert [path for path in sorted(named) if not (ROOT / path).is_file()] == []


def test_a_grouped_file_is_scheduled_with_its_group_and_others_alone() -> None:
    assert _split_scope("tests/loader/test_kills.py::test_x[a::b]") == "spark"
    assert _split_scope("tests/broker/test_memory.py::TestX::test_y") == "tests/broker/test_memory.py"
