"""Where the checkout is, for tests that run its launchers, playbooks and roles by path, and
where Ansible finds it as edgeft.failover."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def collections_path() -> str:
    """The collections path holding this checkout as edgeft.failover: an ansible-test style
    checkout's own .../ansible_collections, else the link scripts/bootstrap.sh makes."""
    if REPO.parent.parent.name == "ansible_collections":
        return str(REPO.parent.parent.parent)
    return str(REPO / ".build" / "collections")
