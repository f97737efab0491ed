"""The installed environment is the lock: requirements.txt pins what privgraph runs on.

Every third-party distribution that privgraph's code (``privgraph/``, ``flows/``, ``tasks/``)
imports, and everything those require in turn, must be installed at exactly its locked version;
and SQLAlchemy must stay below 2.1 (prefect 3.8.0's scheduler fails every loop on 2.1).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CODE = ("privgraph", "flows", "tasks")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


#: requirements-nodeps.txt's packages are installed with --no-deps; these of their declared
#: requirements are provided by another locked distribution (the same module, another build)
NODEPS_SUBSTITUTES = {"opencv-python": "opencv-python-headless"}


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = PIN.match(line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def _lock() -> dict[str, str]:
    """Canonical distribution name -> pinned version, from requirements.txt and
    requirements-nodeps.txt."""
    return {**_pins(ROOT / "requirements.txt"), **_pins(ROOT / "requirements-nodeps.txt")}


def _imported_modules() -> set[str]:
    """Top-level names of every absolute import in privgraph's runtime code."""
    names: set[str] = set()
    for pkg in CODE:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - set(CODE) - {"__future__"}


def _runtime_distributions() -> set[str]:
    """The distributions providing those imports, closed over their (marker-true) requirements."""
    providers = metadata.packages_distributions()
    todo = [canonicalize_name(d) for mod in _imported_modules() for d in providers.get(mod, [])]
    env = default_environment()
    nodeps = set(_pins(ROOT / "requirements-nodeps.txt"))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                dep = canonicalize_name(req.name)
                todo.append(NODEPS_SUBSTITUTES.get(dep, dep) if name in nodeps else dep)
    return seen


def test_the_lock_pins_every_package_exactly():
    lines = [ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.strip()]
    reqs = [ln for ln in lines if not ln.lstrip().startswith(("#", "--hash"))]
    assert reqs and all(PIN.match(ln) for ln in reqs), [ln for ln in reqs if not PIN.match(ln)]
    assert all(ln.rstrip().endswith("\\") for ln in reqs), "every pin carries --hash lines"


def test_what_privgraph_imports_is_installed_at_its_locked_version():
    lock = _lock()
    runtime = _runtime_distributions()
    # not vacuous: the scan finds the stack privgraph is built on, transitive ones included
    assert {"numpy", "torch", "prefect", "sqlalchemy", "torch-geometric"} <= runtime, sorted(runtime)
    missing = sorted(d for d in runtime if d not in lock)
    assert not missing, f"imported at runtime but not in requirements.txt: {missing}"
    differ = {
        d: (metadata.version(d), lock[d])
        for d in sorted(runtime)
        if Version(metadata.version(d)) != Version(lock[d])
    }
    assert not differ, f"installed != locked (installed, locked): {differ}"


def test_nodeps_packages_are_hashed_and_their_substitutes_locked():
    """requirements-nodeps.txt: every pin hashed, disjoint from the main lock, and each
    substituted requirement's replacement pinned in requirements.txt."""
    text = (ROOT / "requirements-nodeps.txt").read_text()
    reqs = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "--hash"))]
    assert reqs and all(PIN.match(ln) and ln.rstrip().endswith("\\") for ln in reqs), reqs
    main = _pins(ROOT / "requirements.txt")
    assert not set(_pins(ROOT / "requirements-nodeps.txt")) & set(main)
    assert all(new in main and old not in main for old, new in NODEPS_SUBSTITUTES.items())


def test_sqlalchemy_is_below_2_1():
    assert Version(_lock()["sqlalchemy"]) < Version("2.1")
    assert Version(metadata.version("sqlalchemy")) < Version("2.1")
