"""The mirrors' lag over the last hour, sampled by the console: a bounded history, sans-IO."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

#: How far back the chart reaches.
WINDOW_SECONDS = 3600.0


class LagHistory:
    """``(time, lag in seconds)`` per mirror alias, oldest first, at most an hour old."""

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self._series: dict[str, deque[tuple[float, float]]] = {}

    def add(self, now: float, lags: Mapping[str, float | None]) -> None:
        for alias, lag in lags.items():
            series = self._series.setdefault(alias, deque())
            if lag is not None:
                series.append((now, lag))
        for series in self._series.values():
            while series and series[0][0] < now - self.window:
                series.popleft()

    def series(self) -> dict[str, list[tuple[float, float]]]:
        return {alias: list(points) for alias, points in sorted(self._series.items())}
