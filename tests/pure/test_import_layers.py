"""The import graph of plugins/module_utils, the lab and the demo: no cycle, and every import
goes down the layers docs/architecture.md draws.

The graph is read statically (every import statement, also those inside functions, so a
cycle cannot hide in a late import); then each module is imported alone, in a fresh
interpreter state, so an import that works only after another module was loaded fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import import_graph
from repo import REPO, collections_path

# The layers of module_utils (docs/architecture.md), bottom up: a unit imports its own package,
# units of lower layers and units of its own group. The agent is a group of its own beside the
# cores: it imports none of them, and none of them imports it.
LAYERS = (
    (0, "foundations", ("constants", "errors", "atomicfile", "jsonrecord", "netlink", "procsys", "module_result",
                        "module_options")),
    (1, "kernel facts and map layouts", ("datapath", "tc")),
    (2, "host model and fabric", ("host", "fabric")),
    (3, "cores", ("program", "planes", "peers", "routed", "plane_check", "plane_info", "multihome", "bond",
                  "backup_routes", "persist", "host_files", "maintenance", "failover_addresses", "restore", "health", "rollout", "uninstall")),
    (3, "the agent", ("agent",)),
)
GROUP_OF = {unit: (level, group) for level, group, units in LAYERS for unit in units}


@pytest.fixture(scope="module")
def graph() -> dict:
    return import_graph.graph()


def _unit(module: str):
    """The top-level package or file of module_utils that a module belongs to, else None."""
    if not module.startswith(import_graph.MODULE_UTILS + "."):
        return None
    return module[len(import_graph.MODULE_UTILS) + 1:].split(".")[0]


def test_no_module_imports_itself_back(graph):
    assert import_graph.cycles(graph) == []


def test_no_cycle_between_the_packages_of_module_utils(graph):
    units = {}
    for module, targets in graph.items():
        unit = _unit(module)
        if unit is not None:
            units.setdefault(unit, set()).update(u for u in map(_unit, targets) if u not in (None, unit))
    assert import_graph.cycles(units) == []


def test_every_unit_of_module_utils_has_a_layer(graph):
    units = {_unit(m) for m in graph} - {None, ""}
    assert sorted(units - set(GROUP_OF)) == [], "add it to LAYERS here and to docs/architecture.md"
    assert sorted(set(GROUP_OF) - units) == [], "a layer names a unit that no longer exists"


def test_imports_go_down_the_layers(graph):
    wrong = []
    for module, targets in sorted(graph.items()):
        unit = _unit(module)
        if not unit:
            continue
        for target in sorted(targets):
            other = _unit(target)
            if other is None or other == unit:
                continue
            mine, theirs = GROUP_OF[unit], GROUP_OF[other]
            if theirs[0] < mine[0] or theirs == mine:
                continue
            wrong.append("%s (layer %d, %s) imports %s (layer %d, %s)" % (module, mine[0], mine[1], target, *theirs))
    assert wrong == []


def test_the_architecture_document_draws_these_layers():
    """docs/architecture.md's table lists, row by row, exactly the units LAYERS holds."""
    text = (REPO / "docs" / "architecture.md").read_text()
    drawn = []
    for line in text.splitlines():
        match = re.match(r"\|\s*(\d)\. ([^|]*?)\s*\|([^|]*)\|", line)
        if match and int(match.group(1)) <= LAYERS[-1][0]:
            drawn.append((int(match.group(1)), match.group(2), set(re.findall(r"`([a-z_]+)/?`", match.group(3)))))
    assert [(level, group, set(units)) for level, group, units in LAYERS] == drawn


def test_every_module_imports_alone(graph):
    """Each module imported first, in an interpreter with no edgeft module loaded yet."""
    script = (
        "import importlib, sys, traceback\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m.startswith(('ansible_collections.edgeft', 'edgeft_'))]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed.append(name + ': ' + traceback.format_exc().splitlines()[-1])\n"
        "print('\\n'.join(failed))\n"
    )
    # __main__ modules run their program on import; they are entry points, not libraries.
    names = sorted(m for m in graph if not m.endswith("__main__"))
    paths = [collections_path(), str(REPO / "lab"), str(REPO / "demo")]
    env_path = ":".join(paths + sys.path)
    result = subprocess.run([sys.executable, "-c", script] + names, capture_output=True, text=True, timeout=300, check=False,
                            env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
