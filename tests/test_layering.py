"""The library stays free of orchestration: no module under privgraph/ imports Prefect or Dask
(tasks/ and flows/ wrap it), and only the CLI, the user's entry point, reaches into flows/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"prefect", "dask", "distributed"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_library_imports_neither_prefect_nor_dask():
    files = sorted((ROOT / "privgraph").rglob("*.py"))
    assert len(files) > 40  # not vacuous: the whole package is scanned
    bad = {str(f.relative_to(ROOT)): sorted(_imports(f) & FORBIDDEN) for f in files if _imports(f) & FORBIDDEN}
    assert not bad, bad
    cli = ROOT / "privgraph" / "cli"  # the CLI package, the user's entry point, and nothing else
    upward = {str(f.relative_to(ROOT)) for f in files if _imports(f) & {"flows", "tasks"} and cli not in f.parents}
    assert not upward, upward
    assert "prefect" in _imports(ROOT / "flows" / "server.py")  # the scan sees lazy (function-level) imports too


# -- the import graph: one floor above another, no circle ------------------------------------------
PACKAGES = ("privgraph", "tasks", "flows")
#: the ground floor: imports nothing of privgraph but each other
GROUND = {"privgraph.errors", "privgraph.guarantee.params", "privgraph.guarantee.private_files", "privgraph.seeding",
          "privgraph.guarantee", "privgraph.guarantee.redaction", "privgraph.mechanisms.randomized_response",
          "privgraph.storage.arrow_io"}
#: what the store may import: nothing above the ledger and the graph
STORAGE_MAY_IMPORT = GROUND | {"privgraph.graph", "privgraph.guarantee.ledger"}


def _module_files() -> dict[str, Path]:
    out = {}
    for base in PACKAGES:
        for f in (ROOT / base).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of privgraph, tasks and flows it imports: EVERY import, at module
    level, inside functions (lazy) and under ``TYPE_CHECKING`` alike."""
    mods = _module_files()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, f in mods.items():
        pkg = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Import):
                out |= {r for a in node.names if (r := resolve(a.name))}
            elif isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                name = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
                for a in node.names:
                    r = resolve(f"{name}.{a.name}") if f"{name}.{a.name}" in mods else resolve(name)
                    if r:
                        out.add(r)
        out.discard(mod)
        graph[mod] = out
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circle_and_no_upward_import():
    graph = import_graph()
    assert len(graph) > 80 and sum(map(len, graph.values())) > 200  # not vacuous
    assert _cycles(graph) == []
    # floors: the ground floor imports only itself; the store nothing above the ledger; tasks no flow
    up = {m: sorted(d - GROUND) for m, d in graph.items() if m in GROUND and d - GROUND}
    assert not up, up
    store = {m: sorted(d - STORAGE_MAY_IMPORT) for m, d in graph.items()
             if m.startswith("privgraph.storage") and {x for x in d if not x.startswith("privgraph.storage")} - STORAGE_MAY_IMPORT}
    assert not store, store
    tasks_up = {m: sorted(x for x in d if x.startswith("flows")) for m, d in graph.items()
                if m.startswith("tasks") and any(x.startswith("flows") for x in d)}
    assert not tasks_up, tasks_up
    # the ledger takes guarantees as data; training reads the release's channel, not the mechanism
    for m in ("privgraph.guarantee.ledger", "privgraph.evaluate.training"):
        assert not [x for x in graph[m] if x.startswith("privgraph.mechanisms")], (m, sorted(graph[m]))
    # configuration: pure models below the declaration, the file's loader above both
    assert not graph["privgraph.config.pipeline"] & {"privgraph.config.disclosure", "privgraph.config.loader", "privgraph.ingest.scoring.theta"}
    assert "privgraph.config.loader" not in graph["privgraph.config.disclosure"]


def test_the_check_finds_a_circle():
    """The scan can fail: a planted import back up (graph -> config) closes a circle."""
    graph = import_graph()
    graph["privgraph.graph"] = graph["privgraph.graph"] | {"privgraph.config.loader"}
    assert any("privgraph.graph" in c and "privgraph.config.loader" in c for c in _cycles(graph))


#: the house by stage (docs/architecture.md, Layout): the packages lowest first, in the pipeline's
#: order; each may import the packages before it in this list and nothing after it, no exceptions
STAGES = ("ground", "ingest", "privatize", "config", "validate", "evaluate", "publish", "cli")
#: the ground floor: the types every stage shares (the graph, the guarantees and the ledger, errors,
#: seeds) and what several stages use (the mechanisms and their contracts, the partition and the
#: executor map over the parts, the store); everything else at the top of privgraph/ is a stage
GROUND_TYPES = {"privgraph", "privgraph.graph", "privgraph.errors", "privgraph.seeding", "privgraph.guarantee",
                "privgraph.mechanisms", "privgraph.parts", "privgraph.storage"}
MAX_TOP_ENTRIES = 15
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "privgraph":
        return None
    return "ground" if ".".join(parts[:2]) in GROUND_TYPES else parts[1]


def _against_the_stages(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, deps in graph.items() for b in deps
                  if _stage(a) and _stage(b) and STAGES.index(_stage(b)) > STAGES.index(_stage(a)))


def test_the_library_is_laid_out_by_stage():
    """At most fifteen entries at the top of privgraph/: the ground floor and one package per stage;
    every module belongs to one of them; no import runs against the stages' order."""
    top = sorted(p.name for p in (ROOT / "privgraph").iterdir() if p.name != "__pycache__")
    assert len(top) <= MAX_TOP_ENTRIES, top
    graph = import_graph()
    stages = {_stage(m) for m in graph if m.startswith("privgraph")}
    assert stages == set(STAGES), stages
    assert _against_the_stages(graph) == []
    # the ground floor imports only the ground floor (the mechanisms train no model: an
    # aggregates release's encoder is handed in by the caller, evaluate/release_encoder.py)
    up = sorted((a, b) for a, deps in graph.items() if _stage(a) == "ground"
                for b in deps if _stage(b) not in (None, "ground"))
    assert up == [], up
    # the privatize stage knows no store: a partitioned release's store commit is publish's
    # (publish/release_parts.py), handed to privatize as a write_parts callable
    assert not [(a, b) for a, deps in graph.items() if a.startswith("privgraph.privatize")
                for b in deps if b.startswith(("privgraph.publish", "privgraph.storage"))]


def test_the_stage_check_finds_an_import_against_the_stages():
    graph = import_graph()
    graph["privgraph.parts.partition"] = graph["privgraph.parts.partition"] | {"privgraph.evaluate.metrics"}
    assert _against_the_stages(graph) == [("privgraph.parts.partition", "privgraph.evaluate.metrics")]


def test_no_module_or_function_is_longer_than_a_screenful_or_two():
    """No module over 600 lines and no definition (docstring included) over 80 lines in privgraph/,
    tasks/ or flows/: a long one is split along its seams (issues 25 and 46)."""
    long = {}
    for mod, f in _module_files().items():
        text = f.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long[mod] = len(text.splitlines())
        for node in ast.walk(ast.parse(text, filename=str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{mod}.{node.name}"] = n
    assert not long, long


def test_a_run_that_trains_no_model_imports_no_model_library():
    """``privgraph run --no-evaluate`` and every refusal before training import the privatize flow
    and the CLI only: no torch, PyG or torchvision (about 6 s of each such process here). The
    evaluate flow, the embed stage and the GNNs are imported where a model is trained or run."""
    import subprocess
    import sys

    code = ("import sys, privgraph.cli, flows.privatize, flows; "
            "bad = [m for m in ('torch', 'torch_geometric', 'torchvision', 'onnxruntime') if m in sys.modules]; "
            "assert not bad, bad; "
            "assert flows.evaluate_flow.name == 'evaluate'")  # the lazy export works
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_reading_the_config_imports_no_table_or_statistics_library():
    """Every CLI command reads the config first, and a refusal stops there: importing the config
    loader (and with it the dataset and mechanism registries) imports no pandas (a table is read
    where it is read), scipy.special or scipy.stats (the HRG diagnostic and the SBM generator
    import theirs), together about 0.6 s of each such process here."""
    import subprocess
    import sys

    code = ("import sys, privgraph.config.loader; "
            "bad = [m for m in ('pandas', 'scipy.special', 'scipy.stats', 'torch') if m in sys.modules]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_flow_process_at_scale_imports_no_model_library():
    """The evaluation at scale trains on the workers; the flow process maps its tasks and
    summarises their results (privgraph.evaluate.selection), so it imports no torch or PyG (its
    peak: docs/partitioned-input.md). The in-memory tasks of the same module import theirs where
    they train or attack."""
    import subprocess
    import sys

    code = ("import sys, flows.privatize_at_scale, tasks.evaluate, privgraph.evaluate.scale_metrics; "
            "bad = [m for m in ('torch', 'torch_geometric', 'scipy.stats') if m in sys.modules]; "
            "assert not bad, bad; "
            "from privgraph.evaluate.scale_metrics import scale_evaluation_task, utility_summary; "
            "from privgraph.evaluate.selection import paired_test; "
            "assert paired_test([0.5, 0.6], [0.4, 0.6])['pvalue'] is not None and 'scipy.stats' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
