"""Shared fixtures: the real-data root and the real datasets (loaded once per session).

Real-data tests are marked ``@pytest.mark.dataset`` and skip, with the reason, only when
``PRIVGRAPH_DATA_ROOT`` is unset or the dataset's files are absent under it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# the temporary Prefect server's telemetry heartbeat only adds sqlite-lock noise to test logs
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# the temporary Prefect server gets 20 s to start by default; on a loaded 2-core machine the CLI
# end-to-end tests (subprocesses inherit this) have seen it time out. The in-process test harnesses
# read it too (prefect_test_harness(server_startup_timeout=None)): their own default, 30 s, was
# missed by every harness when 4 xdist workers started at once
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# pytest-xdist: each worker gets its own Prefect home (the temporary servers' SQLite database lives
# there) and one core's worth of threads (two workers' OpenMP pools on two cores spin against each
# other: the training tests ran 7x slower); subprocesses inherit both
if os.environ.get("PYTEST_XDIST_WORKER"):
    import tempfile

    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"prefect-home-{os.environ['PYTEST_XDIST_WORKER']}-")
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[_var] = "1"

CORA_FILES = tuple(
    f"planetoid/Cora/raw/ind.cora.{s}"
    for s in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
)
FACEBOOK_FILES = tuple(
    f"musae/facebook/facebook_{s}" for s in ("edges.csv", "features.json", "target.csv")
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dataset: needs the real datasets under PRIVGRAPH_DATA_ROOT"
    )


#: the longest modules (minutes each here), started first, longest first, so that no pytest-xdist
#: worker ends on one of them while the others wait; then the other modules with tests that run a
#: Prefect flow, a server, a fault or a Dask cluster; then the rest
LONGEST = ("test_non_interference.py", "test_schedule.py", "test_faults.py", "test_cli_errors.py",
           "test_pipeline_e2e.py", "test_infra.py", "test_readme_user_graph.py", "test_graph_comparison.py",
           "test_server.py", "test_privatize_flow.py")
SLOW_MARKS = ("server", "faults", "flow", "dask")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> tuple[int, bool]:
        name = item.path.name
        return (LONGEST.index(name) if name in LONGEST else len(LONGEST),
                not any(item.get_closest_marker(m) for m in SLOW_MARKS))

    items.sort(key=rank)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores, at most 4. Many of the long tests wait (on a
    server starting, a cron tick, a subprocess, an outage) while the others compute; each worker
    runs one thread (above) and may start Prefect servers, hence the cap."""
    return min(4, (os.cpu_count() or 1) + 1)


def _require(root: Path, files: tuple[str, ...], what: str) -> Path:
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        pytest.skip(f"{what} files absent under PRIVGRAPH_DATA_ROOT={root}: missing {missing}")
    return root


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread for the test, restored after it: multi-threaded CPU kernels sum
    floats in an order that depends on the machine's load (a loaded 2-core machine flipped one
    AUC pair between two same-seed runs), and tests of seeding compare results exactly."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """``$PRIVGRAPH_DATA_ROOT`` as a Path; skips when it is unset or not a directory."""
    env = os.environ.get("PRIVGRAPH_DATA_ROOT")
    if not env:
        pytest.skip("PRIVGRAPH_DATA_ROOT is not set (e.g. PRIVGRAPH_DATA_ROOT=../shared/datasets)")
    root = Path(env).expanduser().resolve()  # absolute: CLI tests run in other directories
    if not root.is_dir():
        pytest.skip(f"PRIVGRAPH_DATA_ROOT={env} is not a directory")
    return root


@pytest.fixture(scope="session")
def cora_root(data_root: Path) -> Path:
    """The data root, after checking Cora's raw files are there (skips otherwise)."""
    return _require(data_root, CORA_FILES, "Cora")


@pytest.fixture(scope="session")
def facebook_root(data_root: Path) -> Path:
    """The data root, after checking MUSAE Facebook's files are there (skips otherwise)."""
    return _require(data_root, FACEBOOK_FILES, "MUSAE Facebook")


@pytest.fixture(scope="session")
def cora(cora_root: Path):
    """Cora as a GraphData (all edges public), loaded once per session. Do not mutate."""
    from privgraph.ingest.datasets import load_planetoid

    return load_planetoid("cora", cora_root)


@pytest.fixture(scope="session")
def facebook(facebook_root: Path):
    """MUSAE Facebook as a GraphData (all edges public), loaded once per session. Do not mutate."""
    from privgraph.ingest.datasets import load_musae_facebook

    return load_musae_facebook(facebook_root)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs, a real file system that fills (ENOSPC): needs root and mount rights, as here
    and on CI; skipped without them."""
    import subprocess

    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture(scope="session")
def moto_endpoint():
    """The URL of a moto S3 server on 127.0.0.1 (a free port), for the whole session."""
    from moto.server import ThreadedMotoServer  # a required test dependency: never skipped

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def prefect_server_env(tmp_path_factory: pytest.TempPathFactory):
    """``PREFECT_API_URL`` and ``PREFECT_HOME`` of one real ``prefect server start`` for the whole
    session (one per pytest-xdist worker), without the services that act on runs by themselves: it
    records the runs that the tests' CLI processes execute."""
    from tests.prefect_server import prefect_server

    with prefect_server(tmp_path_factory.mktemp("prefect-server"), scheduling=False) as server:
        yield {"PREFECT_API_URL": server.url, "PREFECT_HOME": str(server.home)}


@pytest.fixture
def shared_prefect_server(prefect_server_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI runs a test starts as subprocesses (they copy ``os.environ``) report to the
    session's Prefect server instead of each starting a temporary one (about 10 s each here). The
    temporary server is tests/flows/test_server.py's and tests/test_readme_user_graph.py's
    subject; the behaviour under test elsewhere is the same against either."""
    for key, value in prefect_server_env.items():
        monkeypatch.setenv(key, value)
    return prefect_server_env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With ``PRIVGRAPH_TEST_CPU_LOG=DIR``: one JSON line per test in ``DIR/<worker>.jsonl`` with its
    wall seconds and the CPU seconds of this process and of the subprocesses it waited for (a CLI
    run's Dask workers and servers included once the CLI reaps them): the suite's cost without
    the machine's load (docs/development.md)."""
    out = os.environ.get("PRIVGRAPH_TEST_CPU_LOG")
    if not out:
        yield
        return
    import json
    import resource
    import time

    def cpu(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    t0, s0, c0 = time.perf_counter(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    yield
    line = {"test": item.nodeid, "wall": round(time.perf_counter() - t0, 2),
            "cpu_self": round(cpu(resource.RUSAGE_SELF) - s0, 2),
            "cpu_children": round(cpu(resource.RUSAGE_CHILDREN) - c0, 2)}
    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
