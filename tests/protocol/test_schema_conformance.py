"""The declarations in protocol/messages/ say what Apache Kafka's JSON files say.

The JSON files live outside the project (../shared/kafka-message-schemas); when
they are absent these tests skip and say so.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tributary.protocol.messages import (
    API_MESSAGES,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    RequestHeader,
    ResponseHeader,
)
from tributary.protocol.schema import NO_VERSIONS, Struct, Versions

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT.parent / "shared" / "kafka-message-schemas"
pytestmark = pytest.mark.skipif(
    not SCHEMAS.is_dir(), reason=f"Kafka's JSON message definitions not found at {SCHEMAS}"
)

sys.path.insert(0, str(ROOT / "tools"))
from generate_messages import load_json, snake  # noqa: E402

DECLARED = [cls for pair in API_MESSAGES.values() for cls in pair] + [
    RequestHeader,
    ResponseHeader,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
]


def _versions(text: Any) -> Versions:
    return Versions.parse(None if text is None else str(text))


def _expected_default(f: dict[str, Any]) -> Any:
    raw, t = f.get("default"), f["type"]
    if raw == "null":
        return None
    if t.startswith("[]"):
        return []
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(str(raw), 0) if raw not in (None, "") else 0
    if t == "bool":
        return str(raw).lower() == "true"
    if t == "string":
        return raw or ""
    return "skip"  # structs, bytes, uuid, float: checked by the dataclass defaults below


def _check_struct(struct: Struct, fields: list[dict[str, Any]], common: dict[str, Any], where: str) -> None:
    assert [f.json_name for f in struct.fields] == [f["name"] for f in fields], where
    instance = struct.cls()
    for declared, f in zip(struct.fields, fields, strict=True):
        path = f"{where}.{f['name']}"
        assert declared.attr == snake(f["name"]), path
        assert declared.type == f["type"], path
        assert declared.versions == _versions(f["versions"]), path
        assert declared.nullable == _versions(f.get("nullableVersions")), path
        if "tag" in f:
            assert declared.tag == int(f["tag"]), path
            assert declared.tagged == _versions(f.get("taggedVersions", f["versions"])), path
        else:
            assert declared.tag is None and declared.tagged == NO_VERSIONS, path
        assert declared.flexible == (_versions(f["flexibleVersions"]) if "flexibleVersions" in f else None), path
        expected = _expected_default(f)
        if expected != "skip":
            assert declared.default == expected, path
            assert getattr(instance, declared.attr) == expected, path
        elem = f["type"].removeprefix("[]")
        sub = f.get("fields") or (common[elem]["fields"] if elem in common else None)
        if sub is None:
            assert declared.struct is None, path
        else:
            assert declared.struct is not None, path
            _check_struct(declared.struct, sub, common, path)


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_declaration_matches_json(cls: type) -> None:
    spec = cls.SPEC  # type: ignore[attr-defined]
    doc = load_json(SCHEMAS / f"{spec.name}.json")
    assert spec.name == doc["name"]
    assert spec.kind == doc["type"]
    assert spec.api_key == doc.get("apiKey")
    assert spec.valid == _versions(doc["validVersions"])
    assert spec.flexible == _versions(doc.get("flexibleVersions"))
    common = {s["name"]: s for s in doc.get("commonStructs", [])}
    _check_struct(spec.struct, doc["fields"], common, spec.name)


def test_generated_modules_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_messages.py"), "--check", "--schemas", str(SCHEMAS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
