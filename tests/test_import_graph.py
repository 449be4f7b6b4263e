"""The project's import graph: no cycle, and every import points down the layers.

The graph is read with ``ast`` from every module of ``sweep``, ``launchers``
and ``hydra_plugins`` -- imports inside functions included (they hid cycles
before). The layers are listed once, here, top to bottom; a module may import
its own layer and the layers below it, never one above. Every module must be
in a layer (a new module is placed on purpose). The longest matching prefix
decides: ``sweep.record.result`` sits lower than the rest of ``sweep.record``.

Imports under ``if TYPE_CHECKING:`` count too, for the cycle check and the
layers: they never run, but two modules that need each other's types are one
module split in two (the record belongs below both: ``bench/request.py``,
``bench/cell.py``), and a type from a higher layer is still a dependency that
points up.
docs/ARCHITECTURE.md draws the same table.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sweep", "launchers", "hydra_plugins")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # command modules: parse arguments, call the packages (and Hydra's entry points: sweep/cli/)
    ("commands", ("sweep.__main__", "sweep.cli", "sweep.doctor",
                  "sweep.sync", "sweep.report.__main__", "sweep.sim.__main__", "sweep.calibrate", "sweep.schedule", "sweep.decide",
                  "sweep.verify_dynamic",
                  "sweep.engines.__main__", "hydra_plugins")),
    ("trial", ("sweep.trial",)),  # one trial end to end (draws the trial's plots, hands them to record)
    ("report", ("sweep.report",)),  # tables and plots of results
    ("record", ("sweep.record",)),  # MLflow, sync, the parent run (uploads what it is handed, never imports report)
    ("score", ("sweep.score",)),  # metrics, objective and feasibility, speedup, cost
    ("engines", ("sweep.engines",)),  # install engines and weights into the engines cache
    ("stages", ("launchers", "sweep.bench", "sweep.sim")),  # start servers, load them, simulate one
    ("result", ("sweep.record.result", "sweep.record._model")),  # the typed result file
    ("compose", ("sweep.compose",)),  # typed config, checks, render
    # files and bounded network answers (sweep/io/), the statistics and the SLO rule (sweep/stats/)
    ("leaves", ("sweep", "sweep.errors", "sweep.secrets", "sweep.launch", "sweep.io", "sweep.stats")),
)
# Loose modules of sweep/ besides __init__ and __main__: the commands a user types
# (``python -m sweep.X``) and the few leaves; everything else lives in a package.
MAX_LOOSE_MODULES = 10


# ------------------------------------------------------------------------------ the graph


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: Path = ROOT, packages: Sequence[str] = PACKAGES) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            found[_module_name(path, root)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, anywhere, and whether it sits under ``if TYPE_CHECKING:``."""
    def walk(node: ast.AST, typing_only: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from walk(child, True)
            for child in node.orelse:
                yield from walk(child, typing_only)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, typing_only)

    return walk(tree, False)


def edges(sources: Mapping[str, str], is_package: Mapping[str, bool]) -> dict[tuple[str, str], bool]:
    """(importer, imported) -> typing only? for imports between the given modules."""
    known = set(sources)

    def resolve(name: str) -> str | None:
        while name:
            if name in known:
                return name
            name = name.rpartition(".")[0]
        return None

    out: dict[tuple[str, str], bool] = {}
    for mod, text in sources.items():
        package = mod if is_package.get(mod) else mod.rpartition(".")[0]
        for node, typing_only in _imports(ast.parse(text)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if resolve(f"{base}.{a.name}") == f"{base}.{a.name}"
                           else base for a in node.names]
            for target in targets:
                dst = resolve(target)
                if dst is None or dst == mod:
                    continue
                out[(mod, dst)] = out.get((mod, dst), True) and typing_only
    return out


def cycles(graph: Mapping[tuple[str, str], bool]) -> list[list[str]]:
    """Strongly connected components of more than one module (TYPE_CHECKING imports included)."""
    nodes = sorted({n for e in graph for n in e})
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in graph:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for n in nodes:
        if n not in index:
            visit(n)
    return out


def layer_of(module: str, layers: Sequence[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """Index of the layer whose longest prefix matches ``module`` (0 = top)."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                if best is None or len(p) > best[0]:
                    best = (len(p), i)
    return None if best is None else best[1]


def upward(graph: Mapping[tuple[str, str], bool],
           layers: Sequence[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Imports from a lower layer to a higher one (``a -> b (layer x imports layer y)``)."""
    out = []
    for (a, b), typing_only in sorted(graph.items()):
        la, lb = layer_of(a, layers), layer_of(b, layers)
        if la is not None and lb is not None and lb < la:
            note = " (TYPE_CHECKING)" if typing_only else ""
            out.append(f"{a} -> {b}{note}: layer {layers[la][0]} imports layer {layers[lb][0]}")
    return out


def project_graph() -> tuple[dict[str, Path], dict[tuple[str, str], bool]]:
    mods = modules()
    graph = edges({m: p.read_text() for m, p in mods.items()},
                  {m: p.name == "__init__.py" for m, p in mods.items()})
    return mods, graph


# ------------------------------------------------------------------------------ the rules


def test_no_import_cycle() -> None:
    _, graph = project_graph()
    assert cycles(graph) == []


def test_imports_point_down_the_layers() -> None:
    _, graph = project_graph()
    assert upward(graph) == []


def test_every_module_has_a_layer() -> None:
    mods, _ = project_graph()
    assert [m for m in mods if layer_of(m) is None] == []


def test_launchers_import_only_sweeps_leaf_modules() -> None:
    """The launcher layer is a clean one: from sweep, only errors, secrets, atomic I/O, the launch."""
    _, graph = project_graph()
    leaves = [n for n, _ in LAYERS].index("leaves")
    wrong = [f"{a} -> {b}" for (a, b) in graph if a.split(".")[0] == "launchers"
             and b.split(".")[0] == "sweep" and layer_of(b) != leaves]
    assert wrong == []


def test_record_never_imports_report() -> None:
    """Recording does not reach up into presentation: the trial and the Hydra callback draw the
    plots and the HTML with sweep.report and hand them to sweep.record, which only uploads them."""
    _, graph = project_graph()
    wrong = [f"{a} -> {b}" for (a, b) in graph
             if (a == "sweep.record" or a.startswith("sweep.record."))
             and (b == "sweep.report" or b.startswith("sweep.report."))]
    assert wrong == []
    # and the layers say so too: record sits below report, so such an import is an upward one
    assert layer_of("sweep.record.parent") > layer_of("sweep.report.plots")  # type: ignore[operator]
    graph = edges({"sweep.record.parent": "from sweep.report import plots\n", "sweep.report.plots": ""}, {})
    assert upward(graph) == ["sweep.record.parent -> sweep.report.plots: layer record imports layer report"]


def test_sweep_has_few_loose_modules() -> None:
    """sweep/ keeps the commands a user types and a few leaves; the rest lives in packages."""
    loose = sorted(p.name for p in (ROOT / "sweep").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_nothing_in_sweep_imports_a_private_launcher_module() -> None:
    _, graph = project_graph()
    wrong = [f"{a} -> {b}" for (a, b) in graph if a.split(".")[0] == "sweep"
             and b.startswith("launchers.") and b.split(".")[1].startswith("_")]
    assert wrong == []


# ------------------------------------------------------------------------------ the checker itself


def test_the_checker_finds_cycles_and_upward_imports() -> None:
    """A tiny synthetic project: function-level imports and a relative import count,
    TYPE_CHECKING imports count for cycles and layers alike."""
    sources = {
        "app": "def main():\n    import core.b\n",
        "core": "",
        "core.a": "from . import b\n",
        "core.b": "def f():\n    from core import a\n    import app\n",
        "core.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import app\n",
        "core.d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from core import e\n",
        "core.e": "from core import d\n",
    }
    graph = edges(sources, {"core": True})
    layers = (("top", ("app",)), ("bottom", ("core",)))
    # app -> core.b -> app and core.a <-> core.b, all inside functions; core.d <-> core.e through
    # a TYPE_CHECKING import is a cycle too (one module split in two)
    assert cycles(graph) == [["app", "core.a", "core.b"], ["core.d", "core.e"]]
    assert upward(graph, layers) == [
        "core.b -> app: layer bottom imports layer top",
        "core.c -> app (TYPE_CHECKING): layer bottom imports layer top",
    ]
    assert layer_of("core.a", layers) == 1 and layer_of("elsewhere", layers) is None
    assert layer_of("sweep.record.result") == dict((n, i) for i, (n, _) in enumerate(LAYERS))["result"]
