from __future__ import annotations

import pytest

from tributary.broker.group.placement import java_abs, java_string_hashcode, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        # The classic collision: both hash to 2112.
        ("Aa", 2112),
        ("BB", 2112),
        # Java's famous Integer.MIN_VALUE hash.
        ("polygenelubricants", -(2**31)),
        # Outside the BMP: hashed over the UTF-16 surrogate pair, as Java does.
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        ("é", 233),
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_java_abs_maps_min_value_to_zero() -> None:
    assert java_abs(-(2**31)) == 0
    assert java_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0


def test_partition_for_matches_kafka() -> None:
    # abs("hello".hashCode()) % 50 = 99162322 % 50
    assert partition_for("hello", 50) == 22
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(100))
