"""Whether the mirror can reach each side, logged once per change."""

from __future__ import annotations

import logging

from tributary.mirror.metrics import MirrorMetrics

log = logging.getLogger("tributary.mirror")


class Link:
    """One side (``source`` or ``target``): up after a request succeeds, down after one fails
    for a connection reason. Only changes are logged, so a long outage is two lines, not thousands."""

    def __init__(self, side: str, bootstrap: str, metrics: MirrorMetrics) -> None:
        self.side = side
        self.bootstrap = bootstrap
        self.metrics = metrics
        self.is_up: bool | None = None

    def up(self) -> None:
        if self.is_up is not True:
            log.info("event=link_up side=%s bootstrap=%s", self.side, self.bootstrap)
            self.is_up = True
            self.metrics.link_up.labels(self.metrics.source, self.side).set(1)

    def down(self, error: BaseException) -> None:
        self.metrics.error(f"{self.side}_link")
        if self.is_up is not False:
            log.warning("event=link_down side=%s bootstrap=%s error=%r", self.side, self.bootstrap, str(error))
            self.is_up = False
            self.metrics.link_up.labels(self.metrics.source, self.side).set(0)


__all__ = ["Link"]
