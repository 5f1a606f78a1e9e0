"""``log.cleaner.io.max.bytes.per.second``: the cleaner reads and writes no faster than this.

Kafka's ``Throttler``: bytes are counted as they are read and written; every check period the
observed rate is compared with the limit and the cleaner sleeps as long as it takes for the
bytes so far to fit it. :func:`delay` is that decision; :class:`Throttle` applies it with a
clock and a sleep passed in (a test hands fakes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: How often the rate is checked, in seconds (Kafka: 300 ms).
CHECK_PERIOD_S = 0.1


def delay(bytes_done: int, elapsed_s: float, rate: float) -> float:
    """How long to sleep so that ``bytes_done`` bytes over ``elapsed_s`` seconds fit ``rate``."""
    if math.isinf(rate) or bytes_done <= 0:
        return 0.0
    return max(0.0, bytes_done / rate - elapsed_s)


class Throttle:
    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._last_check = self._start
        self._bytes = 0
        #: Bytes counted, and seconds slept, since the start.
        self.total_bytes = 0
        self.slept_s = 0.0

    def __call__(self, count: int) -> None:
        """``count`` more bytes were read or written."""
        self._bytes += count
        self.total_bytes += count
        if math.isinf(self.rate):
            return
        now = self._clock()
        if now - self._last_check < CHECK_PERIOD_S:
            return
        pause = delay(self._bytes, now - self._start, self.rate)
        if pause > 0:
            self._sleep(pause)
            self.slept_s += pause
        self._last_check = self._clock()
