"""Running ``tributary`` commands in-process, capturing what they print."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tributary.deploy.cli.main import main


@dataclass(frozen=True)
class Result:
    status: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.status == 0, self.err
        return json.loads(self.out)


def tributary(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()  # drop anything printed before
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse refusing the command line
        status = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return Result(status, captured.out, captured.err)


def assert_one_line_error(result: Result, status: int, *fragments: str) -> None:
    """An operator error: the given status, one line on stderr (no traceback), nothing on stdout."""
    assert result.status == status, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.out == ""
