"""Fetch v12's check of the fetcher's last fetched epoch (KIP-320), on a log with two epochs."""

from __future__ import annotations

from pathlib import Path

from tests.broker.log.helpers import NOW, batch, open_log
from tributary.broker.handlers.fetch import _diverging
from tributary.protocol.messages import FetchRequest


def test_a_fetcher_past_the_end_of_its_epoch_is_told_where_that_epoch_ends(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(3), 0, NOW)  # epoch 0: offsets 0-2
    log.append(batch(2), 2, NOW)  # epoch 2: offsets 3-4 (epoch 1 never wrote here)
    asked = FetchRequest.FetchPartition

    # A fetcher that read epoch 0 up to offset 5 (it had more of epoch 0 than this log kept).
    diverging = _diverging(log, asked(fetch_offset=5, last_fetched_epoch=0))
    assert diverging is not None and (diverging.epoch, diverging.end_offset) == (0, 3)
    # Epoch 1, which this log never saw: the largest epoch below it, 0, ends at 3.
    diverging = _diverging(log, asked(fetch_offset=4, last_fetched_epoch=1))
    assert diverging is not None and (diverging.epoch, diverging.end_offset) == (0, 3)
    # Agreeing with the log: epoch 0 up to 3, epoch 2 up to the end.
    assert _diverging(log, asked(fetch_offset=3, last_fetched_epoch=0)) is None
    assert _diverging(log, asked(fetch_offset=5, last_fetched_epoch=2)) is None
    log.close()
