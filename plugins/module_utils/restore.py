# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply a host's data path in one run - the programs, then the peer table - at boot, without
Ansible (`edgeft-agent restore-datapath`), and in the datapath module (`run`), which also
writes the record the restore reads.

A reboot loses everything the data path is made of: the tc filters and the
pinned maps (bpffs lives in memory). The datapath module records the arguments
it gave the two steps (edgeft.failover.ebpf_program's and edgeft.failover.peer_table's)
in a JSON file; the restore fills in the modules' defaults from their argument specs and
runs the same core functions, in the same order: load and attach, then fill the peer
table. Drain state is not restored: a host comes back with every plane usable and the
agent judges carrier and probes afresh.
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
from ansible_collections.edgeft.failover.plugins.module_utils.program import restore_record
from ansible_collections.edgeft.failover.plugins.module_utils.program.run import run as run_program
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ARGUMENT_SPEC as PROGRAM_SPEC
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError

DEFAULT_CONFIG = "/etc/edgeft/datapath.json"
PROG = "edgeft-agent restore-datapath"


class RestoreError(EdgeftError):
    """A step failed; the message names it."""


def load(path: str) -> dict:
    cfg = jsonrecord.read_config(path, RestoreError, " (the ebpf_failover role writes it)")
    missing = [s for s in restore_record.STEPS if not isinstance(cfg, dict) or not isinstance(cfg.get(s), dict)]
    if missing:
        raise RestoreError("config: %s has no %s arguments (rerun the ebpf_failover role)" % (path, missing[0]))
    return cfg


def with_defaults(spec: dict, params: dict, where: str = "config") -> dict:
    """params with the module's defaults for what is left out, as AnsibleModule fills them
    (suboptions of dict and list-of-dict options included). Values are validated by the
    core functions themselves, as in a module run; an unknown argument is refused, named
    under `where`."""
    out = {}
    for name, option in spec.items():
        value = params.get(name)
        if value is None:
            value = option.get("default")
            value = value.copy() if isinstance(value, (list, dict)) else value
        sub = option.get("options")
        if sub and isinstance(value, list):
            value = [with_defaults(sub, v, "%s.%s[%d]" % (where, name, i)) if isinstance(v, dict) else v
                     for i, v in enumerate(value)]
        elif sub and isinstance(value, dict):
            value = with_defaults(sub, value, "%s.%s" % (where, name))
        out[name] = value
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise RestoreError("%s: unknown argument %r (the collection on this host is older than the record?)"
                           % (where, unknown[0]))
    return out


def apply_program(params: dict, check_mode: bool = False, where: str = "ebpf_program") -> dict:
    """The ebpf_program step: its module's result (with 'warnings' and 'diff')."""
    try:
        return run_program(with_defaults(PROGRAM_SPEC, params, where), check_mode=check_mode)
    except ProgramError as e:
        raise RestoreError("%s: %s" % (where, e)) from None


def apply_peer_table(params: dict, check_mode: bool = False, where: str = "peer_table"):
    """The peer_table step: (its module's result, warnings)."""
    try:
        return peer_table(with_defaults(PEER_TABLE_SPEC, params, where), check_mode)
    except (OptionError, PeerTableApplyError, DatapathError, OSError) as e:
        raise RestoreError("%s: %s" % (where, e)) from None


def restore(cfg: dict, check_mode: bool = False) -> dict:
    """Attach the programs, then set the peer table; {step: changed}."""
    out = {"ebpf_program": apply_program(cfg["ebpf_program"], check_mode)["changed"]}
    if check_mode and out["ebpf_program"]:
        return out  # nothing is pinned yet to fill
    out["peer_table"] = apply_peer_table(cfg["peer_table"], check_mode)[0]["changed"]
    return out


# The datapath module: the two steps and the record, in one module run per host.
ARGUMENT_SPEC = dict(
    ebpf_program=dict(type="dict", required=True),
    peer_table=dict(type="dict", required=True),
    record=dict(type="path"),
    prune_objects=dict(type="path"),
)


def run(params: dict, check_mode: bool = False):
    """The datapath module: (result, warnings). The record is written only after both steps
    succeeded, so the restore at boot never reads arguments that failed."""
    cfg = {step: params.get(step) for step in restore_record.STEPS}
    record = None
    if params.get("record"):
        record = restore_record.validate(params["record"], cfg, params.get("prune_objects"))  # before any change
    elif params.get("prune_objects"):
        raise RestoreError("prune_objects: needs record (the objects kept are the ones the record names)")
    program = apply_program(cfg["ebpf_program"], check_mode)
    warnings = program.pop("warnings")
    try:
        table, table_warnings = apply_peer_table(cfg["peer_table"], check_mode)
    except RestoreError as e:
        e.result = {"changed": program["changed"], "ebpf_program": program}
        raise
    warnings += table_warnings
    result = {"ebpf_program": program, "peer_table": table, "record": None}
    diff = {"before": {}, "after": {}}
    for step, step_result in (("ebpf_program", program), ("peer_table", table)):
        step_diff = step_result.pop("diff")
        diff["before"][step], diff["after"][step] = step_diff["before"], step_diff["after"]
    if record is not None:
        written, _none = restore_record.write(*record, check_mode=check_mode)
        record_diff = written.pop("diff")
        diff["before"]["record"], diff["after"]["record"] = record_diff["before"], record_diff["after"]
        result["record"] = written
    result["changed"] = any(r and r["changed"] for r in (program, table, result["record"]))
    result["diff"] = diff
    return result, warnings


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
