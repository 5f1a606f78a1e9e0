"""Run a cluster's `tributary users --zookeeper ... set` and `tributary acls --zookeeper ... add`
commands in one process (the broker role, before the brokers start).

    tributary-principals.py < plan.json

The plan, on standard input (it holds passwords, which never go on a command line):
``{"zookeeper": "HOST:PORT[/chroot]", "mechanism": "SCRAM-SHA-512", "users": [name, ...],
"passwords": {name: password}, "grants": [[option, ...], ...]}`` where each grant
is the options of one `tributary acls add` (the inventory makes them: principals.py). Each
command runs exactly as an operator would type it, through the `tributary` command's own entry
point, only without starting a Python per command (twenty of them took a minute of a
deployment). Both commands leave what is already there as it is, so a run changes nothing
unless a password or an ACL is new. Prints one JSON line: the users set and the ACLs added.
A failure is one line on stderr (no password in it) and exit status 1.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
import time

from tributary.deploy.cli.main import main as tributary

#: How long ZooKeeper may take to answer (it may have just been started by the play).
ZOOKEEPER_WAIT = 120.0


def run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``tributary <argv>`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = tributary(argv)
            except SystemExit as exc:  # argparse refusing a command line
                status = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved
    return status, out.getvalue(), err.getvalue()


def main() -> int:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    plan = json.load(sys.stdin)
    zookeeper, mechanism = plan["zookeeper"], plan["mechanism"]
    set_users: list[str] = []
    added = 0
    deadline = time.monotonic() + ZOOKEEPER_WAIT
    for user in plan["users"]:
        argv = ["users", "--zookeeper", zookeeper, "set", user, "--mechanism", mechanism, "--password-file", "-"]
        while True:
            status, out, err = run(argv, plan["passwords"][user])
            # The first command may find ZooKeeper still starting: wait for it, within reason.
            if status == 0 or "no ZooKeeper answered" not in err or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        if status != 0:
            print(f"tributary-principals: user {user}: {err.strip()}", file=sys.stderr)
            return 1
        if "unchanged" not in out:
            set_users.append(user)
    for grant in plan["grants"]:
        status, out, err = run(["acls", "--zookeeper", zookeeper, "add", *grant])
        if status != 0:
            print(f"tributary-principals: acls add {' '.join(grant)}: {err.strip()}", file=sys.stderr)
            return 1
        new = re.search(r"^(\d+) of \d+ ACLs new in ZooKeeper$", out, re.MULTILINE)
        added += int(new[1]) if new else 0
    print(json.dumps({"users_set": set_users, "acls_added": added}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
