"""Exponential backoff, as Kafka's clients compute it (``ExponentialBackoff``): a delay that
doubles per failure up to a maximum, with jitter.

A failure count grows for as long as a broker stays away (a link cut for hours counts a failure
a second), so the doubling stops at the maximum instead of being computed: ``0.1 * 2**1024`` does
not fit a float, and the metadata task of a client whose cluster was unreachable for about 17
minutes died of that OverflowError.
"""

from __future__ import annotations

#: The jitter, either way: Kafka's clients use 0.2 too.
JITTER = 0.2
#: Doublings beyond this change nothing a float can hold next to any sensible maximum.
_MAX_DOUBLINGS = 64


def doubled(initial: float, doublings: int, maximum: float) -> float:
    """``initial`` doubled ``doublings`` times, at most ``maximum``; any count of doublings."""
    return min(initial * 2.0 ** min(doublings, _MAX_DOUBLINGS), maximum)


def jittered(delay: float, draw: float) -> float:
    """``delay`` moved by up to ``JITTER`` of itself either way, as ``draw`` (0 <= draw < 1) says."""
    return delay * (1 - JITTER + 2 * JITTER * draw)
