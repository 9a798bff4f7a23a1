# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restore a host's data path at boot, without Ansible: `edgeft-agent restore-datapath`.

A reboot loses everything the data path is made of: the tc filters and the
pinned maps (bpffs lives in memory). The ebpf_failover role records the
arguments its last run gave edgeft.failover.ebpf_program and
edgeft.failover.peer_table in a JSON file; this fills in the modules' defaults
from their argument specs and runs the same core functions, in the same order:
compile and attach, then fill the peer table. Drain state is not restored: a host comes
back with every plane usable and the agent judges carrier and probes afresh.
"""

from __future__ import annotations

import argparse
import sys

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.peers.apply import PeerTableApplyError
from ansible_collections.edgeft.failover.plugins.module_utils.peers.run import peer_table
from ansible_collections.edgeft.failover.plugins.module_utils.peers.spec import ARGUMENT_SPEC as PEER_TABLE_SPEC
from ansible_collections.edgeft.failover.plugins.module_utils.program.restore_record import STEPS
from ansible_collections.edgeft.failover.plugins.module_utils.program.run import run as run_program
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ARGUMENT_SPEC as PROGRAM_SPEC
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError

DEFAULT_CONFIG = "/etc/edgeft/datapath.json"
PROG = "edgeft-agent restore-datapath"


class RestoreError(EdgeftError):
    """A step failed; the message names it."""


def load(path: str) -> dict:
    cfg = jsonrecord.read_config(path, RestoreError, " (the ebpf_failover role writes it)")
    missing = [s for s in STEPS if not isinstance(cfg, dict) or not isinstance(cfg.get(s), dict)]
    if missing:
        raise RestoreError("config: %s has no %s arguments (rerun the ebpf_failover role)" % (path, missing[0]))
    return cfg


def with_defaults(spec: dict, params: dict) -> dict:
    """params with the module's defaults for what is left out, as AnsibleModule fills them
    (suboptions of dict and list-of-dict options included). Values are validated by the
    core functions themselves, as in a module run."""
    out = {}
    for name, option in spec.items():
        value = params.get(name)
        if value is None:
            value = option.get("default")
            value = value.copy() if isinstance(value, (list, dict)) else value
        sub = option.get("options")
        if sub and isinstance(value, list):
            value = [with_defaults(sub, v) if isinstance(v, dict) else v for v in value]
        elif sub and isinstance(value, dict):
            value = with_defaults(sub, value)
        out[name] = value
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise RestoreError("config: unknown argument %r (the collection on this host is older than the record?)" % unknown[0])
    return out


def restore(cfg: dict, check_mode: bool = False) -> dict:
    """Attach the programs, then set the peer table; {step: changed}."""
    out = {}
    try:
        result = run_program(with_defaults(PROGRAM_SPEC, cfg["ebpf_program"]), check_mode=check_mode)
    except ProgramError as e:
        raise RestoreError("ebpf_program: %s" % e) from None
    out["ebpf_program"] = result["changed"]
    if check_mode and result["changed"]:
        return out  # nothing is pinned yet to fill
    try:
        result, _warnings = peer_table(with_defaults(PEER_TABLE_SPEC, cfg["peer_table"]), check_mode)
    except (OptionError, PeerTableApplyError, DatapathError, OSError) as e:
        raise RestoreError("peer_table: %s" % e) from None
    out["peer_table"] = result["changed"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="restore this host's edgeft data path after a reboot (docs/datapath.md)")
    p.add_argument("--datapath-config", dest="config", default=DEFAULT_CONFIG,
                   help="arguments recorded by the ebpf_failover role (default %(default)s)")
    p.add_argument("--check", action="store_true", help="report what a restore would do, change nothing")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else 2
    try:
        changed = restore(load(args.config), check_mode=args.check)
    except RestoreError as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return 1
    verb = "would change" if args.check else "changed"
    sys.stdout.write("%s: %s\n" % (PROG, ", ".join("%s %s" % (step, verb if c else "unchanged") for step, c in changed.items())))
    return 0
