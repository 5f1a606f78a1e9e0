"""``tributary api-versions``: the Kafka APIs and versions Tributary speaks.

The same table the broker advertises in its ApiVersions response; operators
compare it against a client's needs (``kcat -X debug=protocol`` prints what a
client wants).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tributary.deploy.tables import render_table
from tributary.protocol.messages import API_MESSAGES
from tributary.protocol.supported import SUPPORTED_VERSIONS


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "api-versions", help="list the Kafka APIs and versions Tributary speaks"
    )
    parser.add_argument("--output", choices=("table", "json"), default="table", help="output format")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = [
        {
            "api_key": int(key),
            "name": API_MESSAGES[key][0].__name__.removesuffix("Request"),
            "min_version": versions.lo,
            "max_version": versions.hi,
        }
        for key, versions in sorted(SUPPORTED_VERSIONS.items())
    ]
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    table = [(r["api_key"], r["name"], f"{r['min_version']}-{r['max_version']}") for r in rows]
    print(render_table(("KEY", "API", "VERSIONS"), table, right=("KEY",)))
    return 0
