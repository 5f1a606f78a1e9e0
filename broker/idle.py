"""Closing idle connections (``connections.max.idle.ms``), with a cancel scope's deadline.

A connection is idle while nothing arrives from the client, nothing goes out to
it, and it has no request in hand: none queued or being handled, and none
waiting for the request budget (that wait is the broker's, not the client's).
As in Kafka, where any socket activity keeps a connection alive, a client that
stops reading its responses is idle too: its writer makes no progress. A request
being handled (a long-polling Fetch, a JoinGroup waiting for the other members)
keeps the connection open however long it takes.

There is no watchdog task: the connection's task tree runs inside one cancel
scope, and the timer moves that scope's deadline. Activity pushes it forward;
a request in hand lifts it; when it passes, trio cancels the connection.

Moving a deadline costs trio a heap update, too much to do on every receive and
every write. So activity pushes the deadline only once it is due within the
timeout, and then a slack further (an eighth of the timeout): a connection is
closed between the timeout and an eighth more after its last activity, and a
busy connection moves its deadline about once per slack, not once per chunk.
"""

from __future__ import annotations

import math

import trio

#: How much later than the timeout an idle connection may be closed, as a fraction of it.
SLACK = 1 / 8


class IdleTimer:
    __slots__ = ("_in_hand", "_scope", "_slack", "_timeout")

    def __init__(self, scope: trio.CancelScope, timeout_ms: int | None) -> None:
        """``scope``: the connection's scope, cancelled once idle for ``timeout_ms``
        (None: never)."""
        self._scope = scope
        self._timeout = None if timeout_ms is None else timeout_ms / 1000
        self._slack = 0.0 if self._timeout is None else self._timeout * SLACK
        self._in_hand = 0
        if self._timeout is not None:
            scope.deadline = trio.current_time() + self._timeout + self._slack

    @property
    def expired(self) -> bool:
        """Whether the connection was closed for being idle (read once the scope has exited)."""
        return self._scope.cancelled_caught

    def activity(self) -> None:
        """Bytes came in or went out: the connection is idle from now at the earliest."""
        if self._in_hand or self._timeout is None:
            return
        idle_from = trio.current_time() + self._timeout
        if self._scope.deadline < idle_from:
            self._scope.deadline = idle_from + self._slack

    def begin(self) -> None:
        """A request is in hand (or waits for the budget): not idle until it is done."""
        self._in_hand += 1
        if self._in_hand == 1:
            self._scope.deadline = math.inf

    def end(self) -> None:
        """Done with it: once nothing is in hand, the idle clock starts again from now."""
        self._in_hand -= 1
        if self._in_hand == 0 and self._timeout is not None:
            self._scope.deadline = trio.current_time() + self._timeout + self._slack
