"""Reading a partition ahead of itself: several fetches in flight, at estimated offsets.

Across a long link a fetch costs a round trip before its first byte arrives. Fetching a
partition one request at a time, each from where the previous answer ended, moves at most
one partition fetch per round trip (2 MiB per 100 ms is 20 MB/s, however wide the link):
the limit every mirror maker that reads like a consumer runs into. The next offset is known
only once the previous answer is in, but it can be estimated: a broker answers whole batches
from the one holding the offset asked for, as many as fit in ``window_bytes``, so a window
ends about as many batches further on as fit in it (their size and span learned from what
was fetched so far). The next window is asked from half a batch past that estimate: any
offset inside the batch that starts where the previous answer ends brings that very batch
first, so an estimate off by less than half a batch either way costs nothing.
:class:`FetchWindows` keeps up to ``depth`` fetches of one partition in flight while the
source holds more than what is asked for already (the last stable offset of the latest
answer says how much), and hands the answers on strictly in order, each starting at or
before the end of the one before:

- an answer overlapping the previous one (the estimate was low) is handed on as it is: the
  copier skips the batches it has copied already (``mirror.batches.copyable``);
- an answer starting beyond the previous one's end (the estimate was too high) waits
  while the gap is fetched first: nothing is ever skipped;
- an empty answer (nothing more to read yet, or no room left in the request) drops every
  window: reading goes back to one fetch at a time from the end of what was handed on,
  long-polling at the source's end as before;
- an error drops every window as well; the fetcher backs off and starts again from there.

Sans-IO: the fetcher asks :meth:`FetchWindows.next_window`, marks it sent, and reports its
answer (:meth:`answered`) or failure (:meth:`failed`). tests/mirror/test_windows.py drives
it against a model log with random estimates, answer orders and failures.
"""

from __future__ import annotations

from collections import deque

from tributary.client.raw.batches import RawBatches


class Window:
    """One fetch of the partition, from ``start``; ``base`` is where its answer is expected to
    start (the batch holding ``start``) and ``end`` where it is expected to end (None while
    nothing is known)."""

    __slots__ = ("base", "end", "result", "sent", "start")

    def __init__(self, start: int, base: int, end: int | None) -> None:
        self.start = start
        self.base = base
        self.end = end
        self.sent = False
        self.result: RawBatches | None = None

    def __repr__(self) -> str:
        state = "unsent"
        if self.result is not None:
            answer = self.result
            first = answer.batches[0][1].base_offset if answer.batches else None
            state = f"answered {first}-{answer.next_offset}" if answer.batches else "answered empty"
        elif self.sent:
            state = "sent"
        return f"Window({self.start}, base={self.base}, end={self.end}, {state})"


class FetchWindows:
    """The fetches of one partition in flight, and the order their answers are handed on in."""

    def __init__(self, position: int, *, window_bytes: int, depth: int) -> None:
        if depth < 1 or window_bytes < 1:
            raise ValueError("depth and window_bytes must be positive")
        #: The end of what was handed on: the next answer handed on starts at or before it.
        self.frontier = position
        self.window_bytes = window_bytes
        self.depth = depth
        self._windows: deque[Window] = deque()
        #: Learned from answers: bytes and offsets per batch, and where the source ends.
        self._batch_bytes: float | None = None
        self._batch_offsets = 0.0
        self._end = -1
        #: Answers received and then dropped with their windows, for the caller to let go of.
        self._dropped: list[RawBatches] = []

    @property
    def in_flight(self) -> int:
        """Windows sent and not yet handed on (answered or not)."""
        return sum(1 for w in self._windows if w.sent)

    @property
    def gap_waiting(self) -> bool:
        """Whether the first window is one not sent yet: the gap before an answer that started
        beyond the frontier. Every answer behind it is held until it is answered, so it must go
        out whatever else is in flight (the fetcher's depth limit would otherwise hold it back
        for ever, with the windows it waits on counted as in flight)."""
        return bool(self._windows) and not self._windows[0].sent

    def next_window(self) -> Window | None:
        """The window to fetch next, or None: one waiting to be asked (again) first; else, with
        nothing in flight, one at the frontier; else one beyond the last while there is more
        at the source than the windows cover, up to ``depth`` windows."""
        for window in self._windows:
            if not window.sent:
                return window
        if not self._windows:
            window = Window(self.frontier, self.frontier, self._span_end(self.frontier))
        else:
            if len(self._windows) >= self.depth or self._batch_bytes is None:
                return None
            last = self._windows[-1]
            base = last.result.next_offset if last.result is not None and last.result.batches else last.end
            if base is None:
                return None
            start = base + int(self._batch_offsets / 2)
            if start >= self._end:
                return None
            window = Window(start, base, self._span_end(base))
        self._windows.append(window)
        return window

    def _span_end(self, base: int) -> int | None:
        """Where an answer starting with the batch at ``base`` is expected to end: as many
        whole batches on as fit in a window (at least one)."""
        if self._batch_bytes is None:
            return None
        batches = max(1, int(self.window_bytes // self._batch_bytes))
        return base + max(1, int(batches * self._batch_offsets))

    def describe(self) -> str:
        """The windows' state, for a log line about a partition that makes no progress."""
        rate = "unknown" if self._batch_bytes is None else f"{self._batch_bytes:.0f}B/{self._batch_offsets:.1f}"
        return f"frontier={self.frontier} end={self._end} batch={rate} windows={list(self._windows)}"

    def sent(self, window: Window) -> None:
        window.sent = True

    def knows(self, window: Window) -> bool:
        """Whether ``window`` is still one of this partition's (not dropped meanwhile)."""
        return any(w is window for w in self._windows)

    def take_dropped(self) -> list[RawBatches]:
        """The answers received and dropped since the last call (their bytes can go)."""
        dropped, self._dropped = self._dropped, []
        return dropped

    def held(self) -> list[RawBatches]:
        """The answers received and not handed on yet."""
        return [w.result for w in self._windows if w.result is not None]

    def answered(self, window: Window, result: RawBatches) -> list[RawBatches]:
        """Record ``window``'s answer; the answers now due, in order (each starting at or
        before the frontier, which moves to its end). The answer of a window dropped
        meanwhile is ignored."""
        if not self.knows(window):
            return []
        window.result = result
        due: list[RawBatches] = []
        windows = self._windows
        while windows and windows[0].result is not None:
            head = windows[0]
            answer = head.result
            assert answer is not None
            covered_from = min(head.start, answer.batches[0][1].base_offset) if answer.batches else head.start
            if covered_from > self.frontier:
                # The estimate overshot: fetch what lies between first. (An answer covers from
                # where it was asked, or from the start of the batch holding that, if before.)
                windows.appendleft(Window(self.frontier, self.frontier, None))
                break
            if not answer.batches:
                # Nothing more to read (or no room for it in that request): what lies beyond
                # would find nothing either. Back to one fetch at a time, from the frontier.
                self._learn_end(answer)
                self._clear()
                break
            self._learn(answer)
            due.append(answer)
            self.frontier = max(self.frontier, answer.next_offset)
            windows.popleft()
        return due

    def failed(self, window: Window) -> None:
        """``window``'s fetch failed: every window is dropped (answers still to come are
        ignored); the next one starts at the frontier."""
        if self.knows(window):
            self._clear()

    def _clear(self) -> None:
        self._dropped.extend(self.held())
        self._windows.clear()

    def _learn_end(self, answer: RawBatches) -> None:
        # READ_COMMITTED answers end at the last stable offset; -1 where a broker leaves it out.
        end = answer.last_stable_offset if answer.last_stable_offset >= 0 else answer.high_watermark
        if end >= 0:
            self._end = end

    def _learn(self, answer: RawBatches) -> None:
        self._learn_end(answer)
        span = answer.next_offset - answer.batches[0][1].base_offset
        if span > 0:
            count = len(answer.batches)
            self._batch_bytes = len(answer.records) / count
            self._batch_offsets = span / count


__all__ = ["FetchWindows", "Window"]
