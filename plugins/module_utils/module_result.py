# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How every edgeft module ends: one place that turns a core's result or error into Ansible's.

Takes the AnsibleModule as it is and imports nothing of Ansible's, so the cores and their tests
stay free of it.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


def require_pyroute2(module):
    """Fail naming the package when pyroute2 cannot be imported on the target."""
    # Imported here: importing pyroute2 costs a tenth of a second of CPU, seconds on an emulated
    # host, and the modules that do not talk netlink should not pay it.
    from ansible_collections.edgeft.failover.plugins.module_utils import netlink

    if not netlink.HAS_PYROUTE2:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib('pyroute2 (Debian: python3-pyroute2)'), exception=str(netlink.PYROUTE2_IMPORT_ERROR))


def finish(module, run, diff_headers=None):
    """Run `run()`, which returns (result, warnings), and exit the module with it.

    An EdgeftError or OSError fails the task with its message and the error's partial result;
    every warning goes to module.warn; the result's `diff` is returned only in diff mode, with
    `diff_headers` (before, after) when given.
    """
    try:
        result, warnings = run()
    except (EdgeftError, OSError) as exc:
        module.fail_json(msg=str(exc), **getattr(exc, 'result', {}))
    for warning in warnings:
        module.warn(warning)
    diff = result.pop('diff', None)
    if module._diff and diff is not None:
        if diff_headers:
            diff = dict(before=diff['before'], after=diff['after'], before_header=diff_headers[0], after_header=diff_headers[1])
        result['diff'] = diff
    module.exit_json(**result)


def run_module(module_class, argument_spec, core, pyroute2=True, diff_headers=None):
    """A module's whole main(): its options checked by Ansible (`module_class` is the module's own
    AnsibleModule import), check mode supported, pyroute2 required unless `pyroute2` is false, then
    `core(params, check_mode)` run and reported by finish()."""
    module = module_class(argument_spec=argument_spec, supports_check_mode=True)
    if pyroute2:
        require_pyroute2(module)
    finish(module, lambda: core(module.params, module.check_mode), diff_headers)
