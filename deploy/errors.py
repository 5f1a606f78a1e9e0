"""Operator errors out of Trio's exception groups.

Errors raised inside nurseries reach a command wrapped in (possibly nested)
exception groups. A command prints one line per operator error (an address in
use, an unreachable cluster, a bad topology) and lets anything else keep its
traceback, since that is a bug.
"""

from __future__ import annotations

from collections.abc import Iterator


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``exc``'s groups, depth first (``exc`` itself if it is no group)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def operator_errors(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> list[BaseException] | None:
    """Every leaf of ``exc`` when all of them are of ``kinds``; None when any is not."""
    found = list(leaves(exc))
    return found if found and all(isinstance(e, kinds) for e in found) else None


__all__ = ["leaves", "operator_errors"]
