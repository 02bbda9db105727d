"""The package's shape, read from its source with ``ast``: no import circle, no reaching into another module's
private names, no drawer of a file.

Every ``import`` / ``from ... import`` in ``laya/`` counts, those inside functions and under ``TYPE_CHECKING``
included, relative ones resolved. ``from pkg import name`` is an edge to ``pkg.name`` where that is a module,
else to ``pkg``; importing ``a.b.c`` is an edge to ``a.b.c`` alone (its parent packages' ``__init__`` are not
counted, or every module would sit in one circle with ``laya/__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "laya"
MAX_LINES = 500

BACKBONES = "laya.model.backbones"
SHARED = {f"{BACKBONES}.{name}" for name in ("base", "registry", "calls", "pre_logits", "units")}  # fmt: skip


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module in the package under ``root`` (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, its leading dots resolved against ``module``'s package."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _known(name: str, names: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (None: outside it)."""
    while name and name not in names:
        name = name.rpartition(".")[0]
    return name or None


def imports(names: dict[str, Path]) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """The import graph of the package (module -> modules it imports) and every ``(importer, module, name)`` where
    a module imports a private (underscore, not dunder) name of another of the package's modules."""
    graph: dict[str, set[str]] = {module: set() for module in names}
    private = []
    for module, path in names.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [_known(alias.name, names) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, path, node)
                if _known(base, names) is None:
                    continue
                targets = []
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.append(submodule if submodule in names else _known(base, names))
                    name = alias.name
                    if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                        private.append((module, base, name))
            else:
                continue
            graph[module] |= {t for t in targets if t is not None and t != module}
    return graph, private


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root, children in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_walk_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g\n",  # relative, inside a function
        "b.py": "from laya import c\nimport torch\n",  # a module named from its package; outside the package
        "c.py": "import laya.a\nfrom laya.b import _g, __doc__\n",  # a private name; a dunder is not one
        "sub/__init__.py": "from . import d\nfrom ..a import f\n",
        "sub/d.py": "from laya.sub import e\n",  # not a module: the package
    }
    for name, text in files.items():
        (tmp_path / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / PACKAGE / name).write_text(text)
    graph, private = imports(modules(tmp_path))
    assert graph == {
        "laya": set(),
        "laya.a": {"laya.b"},
        "laya.b": {"laya.c"},
        "laya.c": {"laya.a", "laya.b"},
        "laya.sub": {"laya.sub.d", "laya.a"},
        "laya.sub.d": {"laya.sub"},
    }
    assert private == [("laya.c", "laya.b", "_g")]
    assert sorted(map(sorted, circles(graph))) == [["laya.a", "laya.b", "laya.c"], ["laya.sub", "laya.sub.d"]]
    assert circles({"laya.a": {"laya.b"}, "laya.b": set()}) == []


def test_no_import_circle() -> None:
    graph, _ = imports(modules())
    found = [sorted(c) for c in circles(graph)]
    assert found == [], f"import circles (strongly connected modules): {found}"


def test_no_module_imports_another_modules_private_name() -> None:
    _, private = imports(modules())
    assert private == [], f"(importer, module, private name): {sorted(private)}"


def _registers(path: Path) -> bool:
    """Whether the module defines a backbone family (a class decorated with ``@register_backbone(...)``)."""
    return any(
        isinstance(node, ast.ClassDef)
        and any(
            isinstance(d, ast.Call) and getattr(d.func, "id", None) == "register_backbone" for d in node.decorator_list
        )
        for node in ast.walk(ast.parse(path.read_text()))
    )


def test_backbone_families_import_only_the_base_the_registry_and_shared_helpers() -> None:
    """As timm's model files: a family module never imports another family; the registry imports nothing of the
    subpackage, so no circle can form through it; the base imports only the registry and the shared helpers."""
    names = modules()
    graph, _ = imports(names)
    families = {m for m, path in names.items() if m.startswith(f"{BACKBONES}.") and _registers(path)}
    assert families >= {f"{BACKBONES}.{n}" for n in ("mlp", "cnn", "timm", "torchvision", "transformers", "wrapped")}
    assert not families & SHARED
    inside = {m: {t for t in graph[m] if t.startswith(BACKBONES)} for m in names if m.startswith(f"{BACKBONES}.")}
    reaching = {m: sorted(targets - SHARED) for m, targets in inside.items() if m in families and targets - SHARED}
    assert reaching == {}, f"family modules importing other family modules: {reaching}"
    assert inside[f"{BACKBONES}.registry"] == set()
    assert inside[f"{BACKBONES}.base"] <= SHARED
    assert not {t for m in SHARED for t in inside[m]} - SHARED, "a shared helper imports a family module"


def test_no_file_over_500_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): n
        for path in (ROOT / PACKAGE).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"files over {MAX_LINES} lines: {long}"
