"""Where the checkout is, for tests that run its launchers, playbooks and roles by path, and
where Ansible finds it as edgeft.failover."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def collections_path() -> str:
    """The collections path holding this checkout as edgeft.failover: an ansible-test style
    checkout's own .../ansible_collections, else the link scripts/bootstrap.sh makes."""
    if REPO.parent.parent.name == "ansible_collections":
        return str(REPO.parent.parent.parent)
    return str(REPO / ".build" / "collections")


def playbook_env(**extra: str) -> dict:
    """os.environ for an ansible-playbook run of this checkout: collections_path() first on
    ANSIBLE_COLLECTIONS_PATH, ANSIBLE_CONFIG (when unset) the checkout's ansible.cfg, no colour,
    the default output callback, no retry files; then `extra`."""
    env = dict(os.environ)
    paths = [collections_path()] + [p for p in env.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths),
        "ANSIBLE_CONFIG": env.get("ANSIBLE_CONFIG") or str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
    })
    env.update(extra)
    return env
