"""The pool that large responses are received into (client/wire/buffers.py): a buffer is used
again only once no view of it is left, and the pool keeps within its limits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.client.wire.buffers import ReceiveBuffers

MiB = 1024 * 1024


def test_a_buffer_is_used_again_once_its_last_view_is_gone() -> None:
    pool = ReceiveBuffers()
    first = pool.take(300_000)
    first[:5] = b"first"
    owner = id(first.obj)
    kept = first[2:5]  # a slice keeps the buffer as much as the view does
    del first
    second = pool.take(300_000)
    second_owner = id(second.obj)
    assert second_owner != owner and kept == b"rst"
    del kept, second
    third = pool.take(200_000)  # one of the two, not zeroed: the response is received over it
    assert id(third.obj) in {owner, second_owner}
    assert len(third) == 200_000 and not third.readonly
    assert pool.pooled_bytes == 2 * 512 * 1024


def test_the_smallest_free_buffer_that_fits_is_taken() -> None:
    pool = ReceiveBuffers()
    small, big = pool.take(1 * MiB), pool.take(4 * MiB)
    big_id, small_id = id(big.obj), id(small.obj)
    del big, small
    assert id(pool.take(900_000).obj) == small_id
    assert id(pool.take(2 * MiB).obj) == big_id


def test_a_new_buffer_is_as_large_as_the_largest_response_so_far() -> None:
    """Responses vary in size: a buffer made for a smaller one serves a larger one later."""
    pool = ReceiveBuffers()
    big = pool.take(4 * MiB)
    small = pool.take(1 * MiB)
    assert isinstance(small.obj, bytearray) and len(small.obj) == 4 * MiB
    small_id = id(small.obj)
    del small
    assert id(pool.take(4 * MiB).obj) == small_id
    assert len(big) == 4 * MiB


def test_limits_are_kept_and_free_small_buffers_make_room() -> None:
    pool = ReceiveBuffers(max_buffers=2, max_bytes=8 * MiB)
    a, b = pool.take(1 * MiB), pool.take(1 * MiB)
    c = pool.take(1 * MiB)  # both pooled ones in use: a buffer of its own
    assert pool.pooled_bytes == 2 * MiB and id(c.obj) not in {id(x) for x in pool._buffers}
    del a
    d = pool.take(5 * MiB)  # the free 1 MiB buffer is dropped for the larger one
    assert pool.pooled_bytes == 6 * MiB and id(d.obj) in {id(x) for x in pool._buffers}
    huge = pool.take(9 * MiB)  # more than the pool may keep at all
    assert pool.pooled_bytes == 6 * MiB and len(huge) == 9 * MiB
    assert b.obj is not d.obj


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(8, 3 * MiB), st.booleans()), max_size=30))
def test_no_two_live_views_share_a_buffer(steps: list[tuple[int, bool]]) -> None:
    """Whatever the sizes and whichever views are dropped, a view handed out never shares its
    buffer with a view still alive: a response is never received over one still in use."""
    pool = ReceiveBuffers(max_buffers=3, max_bytes=6 * MiB)
    live: list[tuple[bytes, memoryview]] = []
    for n, (size, drop_oldest) in enumerate(steps):
        view = pool.take(size)
        assert len(view) == size and not view.readonly
        assert all(view.obj is not other.obj for _, other in live)
        tag = n.to_bytes(4, "big")
        view[:4] = tag
        view[-4:] = tag
        live.append((tag, view))
        if drop_oldest:
            live.pop(0)
        assert pool.pooled_bytes <= 6 * MiB and len(pool._buffers) <= 3
        for kept_tag, kept in live:  # nothing written since over a view still alive
            assert kept[:4] == kept_tag and kept[-4:] == kept_tag
