"""Metric names a PromQL expression selects, for checking dashboards against endpoints.

Not a PromQL parser: it removes what cannot be a metric name (string literals,
label matchers, ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``
label lists, range and subquery brackets, ``offset`` and ``@`` modifiers, Grafana
variables, numbers), then keeps the identifiers that are not followed by ``(``
(functions and aggregations) and are not keywords. Grafana's templating
functions are handled by :func:`variable_query_names`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"' r"|'(?:[^'\\]|\\.)*'" r"|`[^`]*`")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_MODIFIER = re.compile(r"\boffset\s+-?[\w.]+|@\s*(?:start\(\)|end\(\)|[\d.]+)", re.IGNORECASE)
_NUMBER = re.compile(
    r"(?<![\w:])(?:0x[0-9a-f]+|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|nan)(?![\w:])"
    r"|(?<![\w:])(?:\d+(?:ms|[smhdwy]))+(?![\w:])",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "atan2", "offset", "by", "without", "on", "ignoring"})
_KEYWORDS |= {"group_left", "group_right"}


def metric_names(expr: str) -> set[str]:
    """Every metric (series) name ``expr`` selects, as written: ``x_bucket`` stays ``x_bucket``."""
    text = _STRING.sub(" ", expr)
    # A name may also be given as a matcher ({__name__="x"}): keep it before matchers go.
    names = set(re.findall(r"__name__\s*=\s*\"([a-zA-Z_:][a-zA-Z0-9_:]*)\"", expr))
    text = _GRAFANA_VARIABLE.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _MODIFIER.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    for match in _IDENTIFIER.finditer(text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() in _KEYWORDS:
            continue
        names.add(match.group())
    return names


def variable_query_names(query: str) -> set[str]:
    """Metric names in a Grafana Prometheus variable query: ``label_values(selector, label)``
    (whose second argument is a label, not a metric), ``query_result(expr)``, or
    ``metrics(regex)`` / ``label_names()`` (which name none)."""
    query = query.strip()
    match = re.fullmatch(r"label_values\s*\((.*)\)", query, re.DOTALL)
    if match:
        arguments = match.group(1)
        # The selector is everything before the last top-level comma; with one argument, a label.
        depth, split = 0, -1
        for i, char in enumerate(arguments):
            depth += char in "({["
            depth -= char in ")}]"
            if char == "," and depth == 0:
                split = i
        return metric_names(arguments[:split]) if split >= 0 else set()
    match = re.fullmatch(r"query_result\s*\((.*)\)", query, re.DOTALL)
    if match:
        return metric_names(match.group(1))
    if re.fullmatch(r"(?:metrics|label_names)\s*\(.*\)", query, re.DOTALL):
        return set()
    return metric_names(query)


def _panels(panels: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # collapsed rows nest theirs


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard's panels (rows included)."""
    return [
        target["expr"]
        for panel in _panels(dashboard.get("panels", []))
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def dashboard_variable_queries(dashboard: dict[str, Any]) -> list[str]:
    queries = []
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        queries.append(query.get("query", "") if isinstance(query, dict) else str(query or ""))
    return [q for q in queries if q]


def dashboard_metric_names(dashboard: dict[str, Any]) -> dict[str, set[str]]:
    """Metric name -> the expressions (or variable queries) using it."""
    used: dict[str, set[str]] = {}
    for expr in dashboard_exprs(dashboard):
        for name in metric_names(expr):
            used.setdefault(name, set()).add(expr)
    for query in dashboard_variable_queries(dashboard):
        for name in variable_query_names(query):
            used.setdefault(name, set()).add(query)
    return used
