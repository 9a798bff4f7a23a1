"""The static import graph of edgeft's packages: every import statement, also those inside
functions, resolved to the modules of the checkout (tests/pure/test_import_layers.py, and the
agent's file list the ebpf_failover role ships)."""

from __future__ import annotations

import ast

from repo import REPO

MODULE_UTILS = "ansible_collections.edgeft.failover.plugins.module_utils"
PACKAGES = {  # import name -> its folder
    MODULE_UTILS: REPO / "plugins" / "module_utils",
    "edgeft_lab": REPO / "lab" / "edgeft_lab",
    "edgeft_demo": REPO / "demo" / "edgeft_demo",
}


def modules() -> dict:
    """{dotted module name: path} of every module in PACKAGES."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package] + parts)] = path
    return out


def imports(name: str, path, known: dict) -> set:
    """The modules of `known` that `name` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # A submodule imported by name is the dependency, not its package's __init__.
            targets = ["%s.%s" % (module, a.name) if "%s.%s" % (module, a.name) in known else module
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]  # `import a.b.c` loads a.b.c; a name imported from a module is the module
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict:
    """{module: {modules it imports}} over every module of PACKAGES."""
    found = modules()
    return {name: imports(name, path, found) for name, path in found.items()}


def closure(graph_: dict, roots) -> set:
    """Every module the roots import, directly or not, the roots included."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph_[name])
    return seen


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one member (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out
