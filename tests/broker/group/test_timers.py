from __future__ import annotations

from tributary.broker.group.timers import TimerQueue


def test_earliest_first_and_rescheduling_replaces() -> None:
    timers = TimerQueue()
    timers.schedule("a", 30)
    timers.schedule("b", 10)
    timers.schedule("c", 20)
    timers.schedule("b", 40)  # pushed back, like a heartbeat does
    assert timers.next_deadline() == 20
    assert timers.pop_due(25) == "c"
    assert timers.pop_due(25) is None
    assert timers.pop_due(100) == "a"
    assert timers.pop_due(100) == "b"
    assert timers.pop_due(100) is None
    assert timers.next_deadline() is None and len(timers) == 0


def test_cancel_and_membership() -> None:
    timers = TimerQueue()
    timers.schedule(("heartbeat", "g", "m"), 5)
    assert ("heartbeat", "g", "m") in timers
    assert timers.deadline(("heartbeat", "g", "m")) == 5
    timers.cancel(("heartbeat", "g", "m"))
    timers.cancel("never scheduled")
    assert timers.next_deadline() is None
    assert timers.pop_due(10) is None


def test_same_deadline_keeps_scheduling_order() -> None:
    timers = TimerQueue()
    for key in "xyz":
        timers.schedule(key, 7)
    assert [timers.pop_due(7) for _ in range(3)] == ["x", "y", "z"]
