# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logic of the ebpf_program module: validate, plan, apply, roll back; and of the two
modules around it: bpf_object (build the objects) and the record of the datapath module.

Loads tc programs - prebuilt objects with libbpf, or the source compiled with bcc on the
target - and attaches them as direct-action bpf filters on clsact qdiscs (tc.py). Kept free
of Ansible imports so tests drive it directly; the module files only parse options and report.

Ownership and idempotence live in the kernel: every filter edgeft attaches
is named ``edgeft:<function>:<digest>`` (TCA_BPF_NAME), where the digest
covers everything that goes into the program (the object's bytes, or what goes into bcc's
compiler). A run reads the names back, loads only what differs and replaces those filters in
place. The only thing the kernel cannot tell is who created a clsact qdisc: that is recorded
in a small JSON file under state_dir.

Split by job:

- errors: ProgramError, importable without tc and pyroute2.
- spec: the argument spec, the constants, the attach points (Point), the units (Unit: an
  object, or a source and its cflags) and the Request; define and integer checks, the headers
  a source includes, a unit's digest (pure: reads files, never the kernel).
- validate: every option checked against the host (root, pyroute2, bpffs, interfaces, libbpf
  or bcc and kernel headers, the kernel's version, sizes of existing pins); builds the
  Request. Changes nothing.
- load: the one step that turns the units of the changing points into loaded programs
  (libbpf, or bcc): {point: program fd}.
- kernel: reading the host: which filters are edgeft's (by name), what the
  clsact qdiscs and filters hold (Observed), pinned maps and the maps a
  program uses.
- record: what the kernel cannot attribute (clsact qdiscs and pins edgeft
  created), in <state_dir>/ebpf_program.json, written through jsonrecord.
- changes: the Plan: what to attach, replace, remove, which clsact qdiscs to
  add or delete and which pins to unpin.
- run: the module end to end: validate, plan, apply present or absent with
  rollback, report.
- build_objects: the bpf_object module, on the controller: one object per plane, cached.
- restore_record: the datapath module's record of what the restore at boot applies, and the objects
  it no longer names removed.
"""
