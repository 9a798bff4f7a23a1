"""Render the network_persist role's templates in Python, the way its template tasks do.

The file list comes from the role's own vars/main.yml (network_persist_files) and every file
is rendered by Ansible's Templar with the template action's settings (trim_blocks, no
lstrip_blocks, "\\n"), so what is compared here is what the role writes; the role runs in
test_persist_role.py check that too, against the same expected files.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import normalize_plan
from repo import REPO

ROLE = REPO / "roles" / "network_persist"
PLANS = REPO / "tests" / "data" / "persist" / "plans"
EXPECTED = REPO / "tests" / "data" / "persist" / "expected"
RENDERERS = ("networkd", "ifupdown", "networkmanager", "netplan")
PREFIX = "60-edgeft"
# systemd-networkd 255 knows per-route RTO minimum; the expected networkd files are for it.
NETWORKD_FULL = 255
# Set to 1 to rewrite tests/data/persist/expected from the templates (then review every line).
UPDATE = os.environ.get("EDGEFT_UPDATE_EXPECTED") == "1"


def load_plan(name: str) -> dict:
    with open(PLANS / ("%s.yml" % name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def info(plan: dict, renderer: str, networkd_version: int | None = NETWORKD_FULL) -> dict:
    """What the role's network_renderer_info task registers, as far as the templates use it."""
    return {"renderer": renderer, "plan": normalize_plan(plan), "renderers": {"networkd": {"version": networkd_version}}}


def _templar(variables: dict):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    return Templar(loader=DataLoader(), variables=variables)


def _template(templar, text: str):
    from ansible.template import trust_as_template

    return templar.template(trust_as_template(text), escape_backslashes=False,
                            overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence="\n"))


def role_variables(plan: dict, renderer: str, networkd_version: int | None = NETWORKD_FULL, prefix: str = PREFIX) -> dict:
    with open(ROLE / "defaults" / "main.yml", encoding="utf-8") as handle:
        variables = yaml.safe_load(handle)
    variables.update(network_persist_plan=plan, network_persist_renderer=renderer, network_persist_file_prefix=prefix,
                     network_persist_info=info(plan, renderer, networkd_version))
    return variables


def files_for(plan: dict, renderer: str, networkd_version: int | None = NETWORKD_FULL, prefix: str = PREFIX) -> list:
    """The role's network_persist_wanted_files: [{path, template, mode, interface?}]."""
    variables = role_variables(plan, renderer, networkd_version, prefix)
    with open(ROLE / "vars" / "main.yml", encoding="utf-8") as handle:
        role_vars = yaml.safe_load(handle)
    return _template(_templar(variables), role_vars["network_persist_wanted_files"])


def render(plan: dict, renderer: str, networkd_version: int | None = NETWORKD_FULL, prefix: str = PREFIX) -> dict:
    """{relative path: (text, mode)} of every file the role writes for plan with renderer."""
    variables = role_variables(plan, renderer, networkd_version, prefix)
    out = {}
    for item in files_for(plan, renderer, networkd_version, prefix):
        text = (ROLE / "templates" / item["template"]).read_text(encoding="utf-8")
        templar = _templar(dict(variables, network_persist_file=item))
        out[item["path"]] = (_template(templar, text), item["mode"])
    return out


def expected_dir(plan_name: str, renderer: str) -> Path:
    return EXPECTED / renderer / plan_name


def read_tree(root: Path) -> dict:
    """{relative path: text} of every file under root."""
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*")) if p.is_file()}


def write_tree(root: Path, files: dict) -> None:
    for rel, (text, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(int(mode, 8))
