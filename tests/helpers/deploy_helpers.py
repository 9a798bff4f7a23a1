"""ansible-playbook on a lab inventory, with its play recap parsed (the deploy and maintenance lab tests)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from repo import REPO

RECAP = re.compile(r'^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)


def run_playbook(inventory, playbook='playbooks/site.yml', *extra, env=None):
    """Run a playbook of the collection; return (returncode, output, {host: (changed, failed)}).
    env: more environment variables for ansible-playbook."""
    proc = subprocess.run(['ansible-playbook', '-i', str(inventory), str(REPO / playbook)] + list(extra),
                          cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1', **(env or {})))
    out = proc.stdout + proc.stderr
    recap = {m.group(1): (int(m.group(3)), int(m.group(4)) + int(m.group(5))) for m in RECAP.finditer(out)}
    return proc.returncode, out, recap


def run_maintenance(lab, playbook, switch, work_dir, *extra, inventory=None):
    """A switch maintenance playbook (switch_drain, switch_undrain, rolling_maintenance) for
    `switch` with a 1 s verification window and its report under work_dir/report; returns
    (returncode, output, recap as run_playbook's, the report's rows or None)."""
    report_dir = work_dir / 'report'
    rc, out, recap = run_playbook(inventory or lab.inventory_path, 'playbooks/%s.yml' % playbook, '-e', 'edgeft_switch=%s' % switch,
                                  '-e', 'edgeft_report_dir=%s' % report_dir, '-e', 'edgeft_verify_seconds=1', *extra)
    reports = sorted(report_dir.glob('*/report.json'))
    return rc, out, recap, json.loads(reports[-1].read_text()) if reports else None


FAILURE = re.compile(r'^(?:fatal|failed): \[(\S+)\].*? => ', re.M)


def failure_messages(out):
    """{host: [msg, ...]} of the failed tasks in a run made with env=ONE_LINE_RESULTS (a
    result is one JSON document, on one line or, for some results, indented over several)."""
    found = {}
    decoder = json.JSONDecoder()
    for m in FAILURE.finditer(out):
        result, _end = decoder.raw_decode(out, m.end())
        found.setdefault(m.group(1), []).append(result.get('msg', json.dumps(result)))
    return found


# Each task result on one line (the checkout's ansible.cfg prints YAML), for failure_messages.
ONE_LINE_RESULTS = {'ANSIBLE_CALLBACK_RESULT_FORMAT': 'json'}


def pinned(lab, host):
    root = lab.pin_root(host)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def tc_filters(lab, host, ifname, direction):
    """tc filters on a host NIC, as `tc` prints them (read-only)."""
    out = subprocess.run(['tc', '-n', lab.netns(host), 'filter', 'show', 'dev', ifname, direction],
                         capture_output=True, text=True, check=False)
    return out.stdout
