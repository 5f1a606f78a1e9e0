#!/usr/bin/env python3
"""Generate ``protocol/messages/*.py`` from Apache Kafka's JSON message definitions.

    python tools/generate_messages.py [--schemas DIR] [--check]

The JSON files (Apache-2.0) are read from ``../shared/kafka-message-schemas``
and never copied into the project; what lands in the project is readable Python:
one class per message with its structs nested inside, plus the ``SPEC`` that
the codec interprets. ``--check`` exits 1 when the committed modules differ from
what the JSON files produce (the test suite runs it).

The classes are plain classes with ``__slots__`` and an ``__init__`` written out,
on :class:`tributary.protocol.schema.StructValue` (equality and ``repr`` as a
dataclass has them), not ``@dataclass`` ones: a dataclass is built by generating
and compiling its methods each time its module is imported, and for these few
hundred classes that was 0.12 CPU-seconds of the start of every broker and
``tributary`` command (docs/benchmarks.md); written out, they are compiled once,
into the module's ``.pyc``.

To support a new API, add it to ``MODULES`` and run the script.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCHEMAS = ROOT.parent / "shared" / "kafka-message-schemas"
OUT_DIR = ROOT / "protocol" / "messages"

# module name -> the JSON definitions it declares
MODULES: dict[str, tuple[str, ...]] = {
    "header": ("RequestHeader", "ResponseHeader"),
    "consumer_protocol": ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment"),
    "consumer_group_heartbeat": ("ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse"),
    "consumer_group_describe": ("ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"),
    "produce": ("ProduceRequest", "ProduceResponse"),
    "fetch": ("FetchRequest", "FetchResponse"),
    "list_offsets": ("ListOffsetsRequest", "ListOffsetsResponse"),
    "metadata": ("MetadataRequest", "MetadataResponse"),
    "offset_commit": ("OffsetCommitRequest", "OffsetCommitResponse"),
    "offset_fetch": ("OffsetFetchRequest", "OffsetFetchResponse"),
    "find_coordinator": ("FindCoordinatorRequest", "FindCoordinatorResponse"),
    "join_group": ("JoinGroupRequest", "JoinGroupResponse"),
    "heartbeat": ("HeartbeatRequest", "HeartbeatResponse"),
    "leave_group": ("LeaveGroupRequest", "LeaveGroupResponse"),
    "sync_group": ("SyncGroupRequest", "SyncGroupResponse"),
    "describe_groups": ("DescribeGroupsRequest", "DescribeGroupsResponse"),
    "list_groups": ("ListGroupsRequest", "ListGroupsResponse"),
    "api_versions": ("ApiVersionsRequest", "ApiVersionsResponse"),
    "create_topics": ("CreateTopicsRequest", "CreateTopicsResponse"),
    "delete_topics": ("DeleteTopicsRequest", "DeleteTopicsResponse"),
    "init_producer_id": ("InitProducerIdRequest", "InitProducerIdResponse"),
    "create_partitions": ("CreatePartitionsRequest", "CreatePartitionsResponse"),
    "describe_configs": ("DescribeConfigsRequest", "DescribeConfigsResponse"),
    "alter_configs": ("AlterConfigsRequest", "AlterConfigsResponse"),
    "incremental_alter_configs": ("IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse"),
    "delete_groups": ("DeleteGroupsRequest", "DeleteGroupsResponse"),
    "offset_delete": ("OffsetDeleteRequest", "OffsetDeleteResponse"),
    "describe_log_dirs": ("DescribeLogDirsRequest", "DescribeLogDirsResponse"),
    "offset_for_leader_epoch": ("OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse"),
    "elect_leaders": ("ElectLeadersRequest", "ElectLeadersResponse"),
    "alter_partition_reassignments": ("AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse"),
    "list_partition_reassignments": ("ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse"),
    "delete_records": ("DeleteRecordsRequest", "DeleteRecordsResponse"),
    "describe_cluster": ("DescribeClusterRequest", "DescribeClusterResponse"),
    "describe_producers": ("DescribeProducersRequest", "DescribeProducersResponse"),
    "add_partitions_to_txn": ("AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse"),
    "add_offsets_to_txn": ("AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse"),
    "end_txn": ("EndTxnRequest", "EndTxnResponse"),
    "write_txn_markers": ("WriteTxnMarkersRequest", "WriteTxnMarkersResponse"),
    "txn_offset_commit": ("TxnOffsetCommitRequest", "TxnOffsetCommitResponse"),
    "describe_transactions": ("DescribeTransactionsRequest", "DescribeTransactionsResponse"),
    "list_transactions": ("ListTransactionsRequest", "ListTransactionsResponse"),
    "sasl_handshake": ("SaslHandshakeRequest", "SaslHandshakeResponse"),
    "sasl_authenticate": ("SaslAuthenticateRequest", "SaslAuthenticateResponse"),
    "describe_user_scram_credentials": (
        "DescribeUserScramCredentialsRequest",
        "DescribeUserScramCredentialsResponse",
    ),
    "alter_user_scram_credentials": ("AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse"),
    "describe_acls": ("DescribeAclsRequest", "DescribeAclsResponse"),
    "create_acls": ("CreateAclsRequest", "CreateAclsResponse"),
    "delete_acls": ("DeleteAclsRequest", "DeleteAclsResponse"),
}

PRIMITIVE_PY = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes",
    "uuid": "uuid.UUID",
}


def load_json(path: Path) -> dict[str, object]:
    """Kafka's JSON files carry ``//`` line comments; strip them outside strings."""
    lines = []
    for line in path.read_text().splitlines():
        in_string = False
        cut = len(line)
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                in_string = not in_string
            elif not in_string and line.startswith("//", i):
                cut = i
                break
        lines.append(line[:cut])
    return json.loads("\n".join(lines))  # type: ignore[no-any-return]


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return s + "_" if keyword.iskeyword(s) else s


def versions_expr(text: str | None) -> str:
    if text is None or text == "none":
        return "NO_VERSIONS"
    if text.endswith("+"):
        return f"V({int(text[:-1])})"
    if "-" in text:
        lo, hi = text.split("-")
        return f"V({int(lo)}, {int(hi)})"
    return f"V({int(text)}, {int(text)})"


@dataclass
class StructDef:
    name: str
    fields: list[dict[str, object]]


class MessageGen:
    """Turns one JSON definition into a class body and a spec expression."""

    def __init__(self, spec: dict[str, object]) -> None:
        self.spec = spec
        self.name = str(spec["name"])
        self.common = {str(s["name"]): s for s in spec.get("commonStructs", [])}  # type: ignore[attr-defined]
        self.structs: list[StructDef] = []  # every nested struct, in definition order

    def struct_fields(self, field: dict[str, object]) -> list[dict[str, object]] | None:
        elem = str(field["type"]).removeprefix("[]")
        if elem in PRIMITIVE_PY:
            return None
        if "fields" in field:
            return field["fields"]  # type: ignore[return-value]
        return self.common[elem]["fields"]  # type: ignore[no-any-return]

    def collect(self, fields: list[dict[str, object]]) -> None:
        for f in fields:
            sub = self.struct_fields(f)
            if sub is None:
                continue
            name = str(f["type"]).removeprefix("[]")
            if all(s.name != name for s in self.structs):
                self.structs.append(StructDef(name, sub))
            self.collect(sub)

    def py_type(self, f: dict[str, object]) -> str:
        t = str(f["type"])
        elem = t.removeprefix("[]")
        inner = PRIMITIVE_PY.get(elem, f"{self.name}.{elem}")
        py = f"list[{inner}]" if t.startswith("[]") else inner
        if f.get("nullableVersions") not in (None, "none"):
            py += " | None"
        return py

    def default(self, f: dict[str, object]) -> tuple[str, str]:
        """(``__init__`` default expression, spec default expression). ``FRESH`` stands for a
        new empty list or struct per instance (see :meth:`assignment`)."""
        t = str(f["type"])
        raw = f.get("default")
        nullable = f.get("nullableVersions") not in (None, "none")
        if raw == "null":
            if not nullable:
                raise SystemExit(f"{self.name}.{f['name']}: default null on a non-nullable field")
            return "None", "None"
        if t.startswith("[]"):
            return "FRESH", "[]"
        if t not in PRIMITIVE_PY:
            return "FRESH", "None"
        if t == "bool":
            bvalue = str(raw).lower() == "true"
            return repr(bvalue), repr(bvalue)
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            value = int(str(raw), 0) if raw not in (None, "") else 0
            return repr(value), repr(value)
        if t == "float64":
            fvalue = float(str(raw)) if raw not in (None, "") else 0.0
            return repr(fvalue), repr(fvalue)
        if t == "string":
            svalue = str(raw) if raw is not None else ""
            return repr(svalue), repr(svalue)
        if t == "uuid":
            return "NULL_UUID", "NULL_UUID"
        # bytes and records
        return 'b""', 'b""'

    def assignment(self, f: dict[str, object]) -> str:
        """The ``__init__`` statement that stores the field's parameter."""
        attr = snake(str(f["name"]))
        if self.default(f)[0] != "FRESH":
            return f"self.{attr} = {attr}"
        t = str(f["type"])
        fresh = "[]" if t.startswith("[]") else f"{self.name}.{t}()"
        return f"self.{attr} = {fresh} if {attr} is FRESH else {attr}"

    def class_body(self, fields: list[dict[str, object]], indent: str) -> list[str]:
        """``__slots__``, the annotated fields (with their ``about`` text) and ``__init__``."""
        if not fields:
            return [f"{indent}__slots__ = ()"]
        attrs = [snake(str(f["name"])) for f in fields]
        out = [f"{indent}__slots__ = {tuple(attrs)!r}"]
        for f in fields:
            about = str(f.get("about", "")).strip()
            if about:
                out.extend(textwrap.wrap(about, 100, initial_indent=f"{indent}#: ", subsequent_indent=f"{indent}#: "))
            out.append(f"{indent}{snake(str(f['name']))}: {self.py_type(f)}")
        out.append("")
        out.append(f"{indent}def __init__(")
        out.append(f"{indent}    self,")
        for f in fields:
            out.append(f"{indent}    {snake(str(f['name']))}: {self.py_type(f)} = {self.default(f)[0]},")
        out.append(f"{indent}) -> None:")
        out.extend(f"{indent}    {self.assignment(f)}" for f in fields)
        return out

    def spec_expr(self, cls_path: str, fields: list[dict[str, object]], indent: str) -> str:
        lines = [f"Struct({cls_path}, ("]
        for f in fields:
            args = [
                repr(snake(str(f["name"]))),
                repr(str(f["name"])),
                repr(str(f["type"])),
                versions_expr(str(f["versions"])),
            ]
            kw = []
            if f.get("nullableVersions") not in (None, "none"):
                kw.append(f"nullable={versions_expr(str(f['nullableVersions']))}")
            if "tag" in f:
                kw.append(f"tagged={versions_expr(str(f.get('taggedVersions', f['versions'])))}")
                kw.append(f"tag={int(str(f['tag']))}")
            if "flexibleVersions" in f:
                kw.append(f"flexible={versions_expr(str(f['flexibleVersions']))}")
            spec_default = self.default(f)[1]
            if spec_default != "None":
                kw.append(f"default={spec_default}")
            if f.get("ignorable"):
                kw.append("ignorable=True")
            sub = self.struct_fields(f)
            if sub is not None:
                elem = str(f["type"]).removeprefix("[]")
                kw.append("struct=" + self.spec_expr(f"{self.name}.{elem}", sub, indent + "    "))
            lines.append(f"{indent}    Field({', '.join(args + kw)}),")
        lines.append(f"{indent}))")
        return "\n".join(lines)

    def render(self) -> str:
        fields: list[dict[str, object]] = self.spec["fields"]  # type: ignore[assignment]
        self.collect(fields)
        out = [f"class {self.name}(StructValue):"]
        kind = self.spec["type"]
        api = f", API key {self.spec['apiKey']}" if "apiKey" in self.spec else ""
        out.append(
            f'    """Kafka {kind} {self.name}{api}: versions {self.spec["validVersions"]}, '
            f'flexible {self.spec.get("flexibleVersions", "none")}."""'
        )
        out.append("")
        out.append("    SPEC: ClassVar[Message]")
        for s in self.structs:
            out.append("")
            out.append(f"    class {s.name}(StructValue):")
            out.extend(self.class_body(s.fields, "        "))
        out.append("")
        out.extend(self.class_body(fields, "    "))
        api_key = self.spec.get("apiKey")
        out.append("")
        out.append("")
        out.append(f"{self.name}.SPEC = Message(")
        out.append(f"    name={self.name!r},")
        out.append(f"    kind={kind!r},")
        out.append(f"    api_key={api_key!r},")
        out.append(f"    valid={versions_expr(str(self.spec['validVersions']))},")
        out.append(f"    flexible={versions_expr(str(self.spec.get('flexibleVersions', 'none')))},")
        out.append(f"    struct={self.spec_expr(self.name, fields, '    ')},")
        out.append(")")
        return "\n".join(out)


HEADER = '''"""{doc}

Generated by tools/generate_messages.py from Apache Kafka's message definitions
({files}; Apache License 2.0).
Do not edit by hand: change the generator and rerun it.
"""

from __future__ import annotations

{imports}
'''


def imports_for(body: str) -> str:
    """Only the imports the generated body uses, in ruff's isort order."""
    std = []
    if "uuid." in body:
        std.append("import uuid")
    std.append("from typing import ClassVar")
    local = []
    if "NULL_UUID" in body:
        local.append("from ..primitives import NULL_UUID")
    names = [
        n for n in ("FRESH", "NO_VERSIONS", "Field", "Message", "Struct", "StructValue") if re.search(rf"\b{n}\b", body)
    ]
    local.append(f"from ..schema import {', '.join(names)}")
    if re.search(r"\bV\(", body):
        local.append("from ..schema import Versions as V")
    return "\n".join(std) + "\n\n" + "\n".join(local)


def render_module(module: str, names: tuple[str, ...], schemas: Path) -> str:
    body = "".join(f"\n\n{MessageGen(load_json(schemas / f'{name}.json')).render()}\n" for name in names)
    header = HEADER.format(
        doc=f"Kafka messages: {', '.join(names)}.",
        files=", ".join(f"{n}.json" for n in names),
        imports=imports_for(body),
    )
    return header + body


def render_index(schemas: Path) -> str:
    lines = [
        '"""Every declared Kafka message, and the request/response classes by API key.',
        "",
        "Generated by tools/generate_messages.py. Do not edit by hand.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import IntEnum",
        "",
    ]
    apis: list[tuple[int, str, str]] = []
    exported: list[str] = []
    for module, names in sorted(MODULES.items()):
        lines.append(f"from .{module} import {', '.join(sorted(names))}")
        exported.extend(names)
        specs = {n: load_json(schemas / f"{n}.json") for n in names}
        reqs = [n for n, s in specs.items() if s["type"] == "request"]
        for req in reqs:
            resp = req.removesuffix("Request") + "Response"
            apis.append((int(str(specs[req]["apiKey"])), req, resp))
    apis.sort()
    lines += ["", "", "class ApiKey(IntEnum):", '    """The API keys of the declared requests."""', ""]
    for key, req, _ in apis:
        lines.append(f"    {snake(req.removesuffix('Request')).upper()} = {key}")
    lines += [
        "",
        "",
        "#: API key -> (request class, response class)",
        "API_MESSAGES: dict[ApiKey, tuple[type, type]] = {",
    ]
    for _key, req, resp in apis:
        lines.append(f"    ApiKey.{snake(req.removesuffix('Request')).upper()}: ({req}, {resp}),")
    lines += ["}", "", "__all__ = [", '    "API_MESSAGES",', '    "ApiKey",']
    lines += [f'    "{n}",' for n in sorted(exported)]
    lines += ["]", ""]
    return "\n".join(lines)


def generate(schemas: Path) -> dict[Path, str]:
    files = {OUT_DIR / f"{m}.py": render_module(m, names, schemas) for m, names in MODULES.items()}
    files[OUT_DIR / "__init__.py"] = render_index(schemas)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", type=Path, default=DEFAULT_SCHEMAS)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not args.schemas.is_dir():
        print(f"schema directory not found: {args.schemas}", file=sys.stderr)
        return 2
    files = generate(args.schemas)
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale else 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for p in stale:
        p.write_text(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
