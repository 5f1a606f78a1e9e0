"""Find the line of a key in TOML text.

tomllib returns plain dicts without positions, yet an operator needs to be told
*where* a topology is wrong. This module finds the line of a key path such as
``("mirrors", "west", "source")`` or ``("clusters", "east", "brokers", 1, "port")``
by reading the text itself: table headers (``[mirrors.west]``), keys (``source =``),
inline tables (``zookeeper = { servers = [...] }``) and arrays of inline tables
(``brokers = [ {...}, {...} ]``, an integer in the path picks one of them).

It is a locator, not a parser: the file has already been parsed by tomllib, so
it may assume the text is valid TOML. When part of a path cannot be found it
answers the line of the deepest part that could.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

PathPart = str | int

_HEADER = re.compile(r"^[ \t]*\[\[?(?P<name>[^\]\n]+?)\]\]?[ \t]*(?:#.*)?$", re.MULTILINE)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _split_dotted(name: str) -> list[str]:
    """``a."b.c".d`` -> ["a", "b.c", "d"]."""
    parts = re.findall(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[^.\s]+)\s*(?:\.|$)', name)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


def _key_pattern(key: str) -> re.Pattern[str]:
    quoted = re.escape(key)
    spelled = rf'(?:{quoted}|"{quoted}"|\'{quoted}\')' if _BARE_KEY.match(key) else rf'(?:"{quoted}"|\'{quoted}\')'
    # A key starts a line or follows "{" or "," of an inline table, and is followed by "=".
    return re.compile(rf"(?:^|(?<=[{{,]))[ \t]*{spelled}[ \t]*=", re.MULTILINE)


def _skip_string(text: str, pos: int) -> int:
    """Position just after the string starting at ``pos``."""
    for quote in ('"""', "'''", '"', "'"):
        if text.startswith(quote, pos):
            i = pos + len(quote)
            while i < len(text):
                if quote[0] == '"' and text[i] == "\\":
                    i += 2
                    continue
                if text.startswith(quote, i):
                    return i + len(quote)
                i += 1
            return len(text)
    return pos + 1


def _nth_inline_table(text: str, pos: int, end: int, index: int) -> int | None:
    """Position of the ``index``-th element of the array whose ``[`` follows ``pos``."""
    start = text.find("[", pos, end)
    if start < 0:
        return None
    depth, seen, i = 0, 0, start
    while i < end:
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
            continue
        if ch in "[{":
            depth += 1
            if depth == 2:
                if seen == index:
                    return i
                seen += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return None
        i += 1
    return None


def _value_end(text: str, pos: int, end: int) -> int:
    """Where the value starting at (or after the ``=`` at) ``pos`` ends, if it is an inline
    table or array; otherwise ``end``: later parts of the path are searched only inside it."""
    i = pos
    while i < end and text[i] in " \t=":
        i += 1
    if i >= end or text[i] not in "[{":
        return end
    depth = 0
    while i < end:
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return end


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def find_line(text: str, path: Sequence[PathPart]) -> int | None:
    """The 1-based line where ``path`` is defined in ``text``, or the closest enclosing line.

    None only when not even the first part of the path appears.
    """
    # The longest table header that is a prefix of the path (arrays of tables are not used here).
    best: tuple[int, int, int] | None = None  # (matched parts, header start, body end)
    headers = list(_HEADER.finditer(text))
    for n, header in enumerate(headers):
        parts = _split_dotted(header.group("name"))
        if len(parts) <= len(path) and list(path[: len(parts)]) == parts and (best is None or len(parts) > best[0]):
            body_end = headers[n + 1].start() if n + 1 < len(headers) else len(text)
            best = (len(parts), header.start(), body_end)
    if best is None:
        # Top-level keys live before the first header.
        matched, pos, end = 0, 0, headers[0].start() if headers else len(text)
        found: int | None = None
    else:
        matched, pos, end = best
        found = pos
    for part in path[matched:]:
        if isinstance(part, int):
            at = _nth_inline_table(text, pos, end, part)
            if at is None:
                break
            end = _value_end(text, at, end)
        else:
            m = _key_pattern(part).search(text, pos, end)
            if m is None:
                break
            at = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
            end = _value_end(text, m.end(), end)
        pos = found = at
    return None if found is None else _line_of(text, found)
