"""Applies backup routes to lab hosts through ansible-playbook (tests/lab/backup_routes/apply.yml).

The module runs on the lab hosts through the edgeft.failover.netns connection with the
target interpreter (/usr/bin/python3 and Debian's pyroute2), exactly as site.yml would run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from repo import REPO

PLAYBOOK = Path(__file__).resolve().parent / "apply.yml"
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


class Applied:
    """One ansible-playbook run: return code, output, {host: changed count}, {host: module result}."""

    def __init__(self, rc, output, changed, results):
        self.rc, self.output, self.changed, self.results = rc, output, changed, results


def apply_routes(lab, declared, *extra, hosts=("r1h1", "r2h1")):
    """Set the backup routes of `hosts` to declared[host] (missing: none) with tests/lab/backup_routes/apply.yml."""
    out_dir = lab.work_dir / ("run-%s" % uuid.uuid4().hex[:6])
    out_dir.mkdir()
    extra_vars = out_dir / "vars.json"
    extra_vars.write_text(json.dumps({"backup_routes_declared": declared, "backup_routes_out": str(out_dir)}))
    proc = subprocess.run(["ansible-playbook", "-i", str(lab.inventory_path), str(PLAYBOOK), "--limit", ",".join(hosts),
                           "-e", "@%s" % extra_vars, *extra], cwd=REPO, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    output = proc.stdout + proc.stderr
    changed = {m.group(1): int(m.group(3)) for m in RECAP.finditer(output)}
    results = {h: json.loads((out_dir / ("%s.json" % h)).read_text()) for h in hosts if (out_dir / ("%s.json" % h)).exists()}
    return Applied(proc.returncode, output, changed, results)
