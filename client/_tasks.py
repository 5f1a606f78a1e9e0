"""A nursery for a context manager's background tasks.

Connections and clusters run background tasks (a reader, a writer, a
metadata refresher) for as long as their ``async with`` block lasts. A plain
nursery wrapped around the block would wrap whatever the block raises in an
ExceptionGroup (trio's strict exception groups), so that ``except KafkaError``
around it would stop working. Here the block's own exception is caught, the
background tasks are cancelled, and the exception is raised again unwrapped
once the nursery has closed. The background tasks catch their own expected
failures; anything else they raise is a bug and surfaces as the nursery's
ExceptionGroup.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


@asynccontextmanager
async def background_nursery() -> AsyncIterator[trio.Nursery]:
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        except BaseException as exc:
            body_error = exc
        finally:
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
