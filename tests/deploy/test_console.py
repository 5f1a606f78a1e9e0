"""The operator's page in a real browser: Debian's Chromium, headless, against `tributary up`.

What a person would see is what the test reads: the DOM Chromium renders (``--dump-dom``),
every cluster up, the audit's verdicts, then a broker shown down once it stops answering.
A screenshot of that page is kept under artifacts/ (and the test's own directory)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.deploy.test_audit import produce
from tests.deploy.test_status import poll
from tests.deploy.topologies import running_up, write_topology
from tributary.deploy.appliance.topology import load_topology
from tributary.deploy.audit.model import HOUR_MS
from tributary.testing.ports import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/setup.sh)"
)


def chromium(profile: Path, *args: str) -> str:
    # The flags keep Chromium off the network it would otherwise try to reach at every start.
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def seen(profile: Path, url: str, predicate: str, timeout: float = 60.0) -> str:
    """The page's rendered DOM once ``predicate`` (a regular expression) is on it."""

    def rendered() -> str | None:
        dom = chromium(profile, "--dump-dom", url)
        return dom if re.search(predicate, dom, re.S) else None

    found: str = poll(rendered, timeout, f"{predicate!r} on {url}")
    return found


def test_the_console_shows_the_appliance_its_audit_and_a_broker_that_stops(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml", mirrors=True)
    topology = load_topology(path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    profile = tmp_path / "chromium"
    with running_up(path, tmp_path / "up.out", "--console", f"127.0.0.1:{port}", "--console-audit-interval", "2") as up:
        up.wait_for(rf"^console on http://127\.0\.0\.1:{port}/")
        now = int(time.time() * 1000)
        hour = now - now % HOUR_MS - HOUR_MS
        produce(topology.clusters["east"].bootstrap, {hour: 120}, "console")

        # Everything up, and the hour audited: mirrored, not loaded yet (no load has run).
        dom = seen(profile, url, r"everything up.*<td>pageviews</td>.*<td>120</td><td>120</td><td>120</td>.*"
                                 r"not loaded yet")  # fmt: skip
        assert "Mirror lag, last hour" in dom and "<svg" in dom
        assert "every difference explained" in dom

        # A broker that stops answering is shown down (SIGSTOP: a killed one is restarted by the
        # supervisor within a second, which would race the page).
        broker = topology.clusters["east"].brokers[0]
        pid = up.pids()[f"broker/east/{broker.id}"]
        os.kill(pid, signal.SIGSTOP)
        try:
            down = (
                rf"something is down.*broker {broker.id} <span class=\"?muted\"?>{re.escape(broker.address)}</span>"
                r"</td><td class=\"?state\"?><span class=\"down\">down"
            )
            dom = seen(profile, url, down)
            ARTIFACTS.mkdir(exist_ok=True)
            shot = tmp_path / "console.png"
            chromium(profile, f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", url)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
            shutil.copy(shot, ARTIFACTS / "console.png")
        finally:
            os.kill(pid, signal.SIGCONT)
