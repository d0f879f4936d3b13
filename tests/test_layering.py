"""The package's layering (issue 14): no import circles, `ir` at the bottom, and every pattern
family module part of the library.

The import graph has an edge A -> B for each `import` / `from ... import` of a shlo_env module
B written in module A, at module level *and inside functions*. A deferred import does not fail
when the package loads, but it is still a circle in the design (both circles issue 14 found,
bench <-> noise and builder <-> patterns.base, were deferred imports). `from pkg import name`
is an edge to the submodule `pkg.name` when there is one, else to `pkg` (its `__init__`). Not
edges: imports under `if TYPE_CHECKING:` (annotations only, never run), and the parent packages
Python runs implicitly (that would tie every module to the `shlo_env` package, which re-exports
the public API).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "shlo_env"


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under `root` (a package directory)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` except those under `if TYPE_CHECKING:` (its `else:` branch runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _is_type_checking(node):
            todo.extend(node.orelse)  # type: ignore[attr-defined]
        else:
            todo.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that module `name` imports (anywhere in its file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..y import z
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    known = _modules(root)
    return {name: _imports(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_finds_a_deferred_circle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("def g():\n    import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import a, c\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n"
                              "else:\n    import pkg.c\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert graph["pkg.d"] == {"pkg.a", "pkg.c"} and graph["pkg.e"] == {"pkg.c"}  # annotations only: no edge
    assert circles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_ir_is_the_bottom_layer():
    graph = import_graph()
    assert graph["shlo_env.ir.tensor_types"] == set()
    assert graph["shlo_env.ir.ops"] == {"shlo_env.ir.tensor_types"}
    assert not any(m.startswith("shlo_env.patterns") for m in graph["shlo_env.ir.builder"])


def test_region_cutting_is_pure_ir():
    """Cutting a region reads only the IR and the driver: no compile, no run, no profile made
    (it reads a `kernel_profile.Profile` for annotations only); its inputs and its judging are
    the measuring floor's, which must not import the search, learning or the front ends."""
    graph = import_graph()
    assert all(m.startswith(("shlo_env.ir", "shlo_env.rewrite.driver", "shlo_env.patterns"))
               for m in graph["shlo_env.rewrite.region_cut"]), graph["shlo_env.rewrite.region_cut"]
    above = ("shlo_env.search", "shlo_env.learn", "shlo_env.api", "shlo_env.research")
    for module in ("shlo_env.measure.region_inputs", "shlo_env.measure.region_timing"):
        assert not any(m.startswith(above) for m in graph[module]), (module, graph[module])


# --- pattern families ---------------------------------------------------------------------------

def families(directory: Path) -> set[str]:
    """Modules of `directory` that define a pattern registered with `@register`."""
    def registers(path: Path) -> bool:
        return any(isinstance(node, ast.ClassDef)
                   and any(isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list)
                   for node in ast.walk(ast.parse(path.read_text())))

    return {p.stem for p in directory.glob("*.py") if p.stem != "__init__" and registers(p)}


def imported_submodules(init: Path, package: str) -> set[str]:
    """Submodules of `package` its `__init__.py` imports (from package import x / import package.x)."""
    out = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module == package:
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            out.add(node.module[len(package) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name[len(package) + 1:].split(".")[0] for a in node.names
                       if a.name.startswith(package + "."))
    return out


def test_family_detection(tmp_path):
    (tmp_path / "__init__.py").write_text("from pkg import used\n")
    (tmp_path / "used.py").write_text("@register\nclass A(Pattern):\n    pass\n")
    (tmp_path / "forgotten.py").write_text("@register\nclass B(Pattern):\n    pass\n")
    (tmp_path / "helpers.py").write_text("def register(cls):\n    return cls\n")
    assert families(tmp_path) == {"used", "forgotten"}
    assert families(tmp_path) - imported_submodules(tmp_path / "__init__.py", "pkg") == {"forgotten"}


def test_every_pattern_family_is_imported_by_the_package():
    directory = PACKAGE / "patterns"
    found = families(directory)
    assert {"algebraic", "dot", "loops"} <= found  # the detection sees the families
    missing = found - imported_submodules(directory / "__init__.py", "shlo_env.patterns")
    assert not missing, f"pattern families not imported by shlo_env/patterns/__init__.py: {sorted(missing)}"
    from shlo_env.patterns import all_patterns

    registered_in = {type(p).__module__.rpartition(".")[2] for p in all_patterns()}
    assert registered_in == found


# --- the layers (subpackages) ---------------------------------------------------------------------

#: Subpackages by floor, bottom up: a module imports only from its own floor or below.
FLOORS = {
    "_jax_compat": 0, "_version": 0, "logs": 0,
    "ir": 1,
    "patterns": 2, "rewrite": 2,
    "execute": 3,
    "measure": 4, "corpus": 4, "zoo": 4,  # datasets load with the measuring floor (runtime_ms, profiles)
    "search": 5, "learn": 5,  # learned rankers inside the search, the search inside dataset building
    "api": 6, "research": 6,
    "bench": 7, "testing": 7,
    "cli": 8, "__main__": 8, "": 8,  # "": the package's __init__ (the public names)
}
#: Facts every floor may read: they import nothing of ours but `ir` and each other.
FACTS = {"shlo_env.measure.numerics", "shlo_env.measure.timing_policy", "shlo_env.measure.sequential_test",
         "shlo_env.measure.noise_thresholds", "shlo_env.measure.memory"}
#: Imports up the floors that are known and deferred (inside a function), with why. The test
#: fails when one disappears, so the list only shrinks.
KNOWN_UPWARD = {
    ("shlo_env.measure.region_timing", "shlo_env.bench.executors"): "regions' compiles fanned out over a sweep's executor",
    ("shlo_env.execute.runners", "shlo_env.measure.kernel_profile"): "the worker runs a profile it is sent",
    ("shlo_env.search.options", "shlo_env.api.cache"): "a pattern's identity in the cache key",
    ("shlo_env.learn.policy", "shlo_env.research.gym_env"): "the policy learns in the gym environment",
    ("shlo_env.research.gym_env", "shlo_env.bench.examples"): "the gym's built-in example programs",
    ("shlo_env.research.gym_env", "shlo_env.testing.random_programs"): "the gym's random programs",
}


def floor_of(module: str) -> int:
    parts = module.split(".")
    return FLOORS[parts[1] if len(parts) > 1 else ""]


def test_every_subpackage_has_a_floor():
    missing = {m.split(".")[1] for m in import_graph() if "." in m} - set(FLOORS)
    assert not missing, f"subpackages without a floor in FLOORS: {sorted(missing)}"


def test_facts_import_only_facts_and_ir():
    graph = import_graph()
    for module in FACTS:
        assert all(m in FACTS or floor_of(m) <= 1 for m in graph[module]), (module, graph[module])


def test_imports_go_down_the_floors():
    graph = import_graph()
    up = {(a, b) for a, targets in graph.items() for b in targets
          if b not in FACTS and floor_of(b) > floor_of(a)}
    unknown = up - set(KNOWN_UPWARD)
    assert not unknown, "imports up the floors: " + "; ".join(f"{a} -> {b}" for a, b in sorted(unknown))
    gone = set(KNOWN_UPWARD) - up
    assert not gone, f"no longer imported up the floors, remove from KNOWN_UPWARD: {sorted(gone)}"
