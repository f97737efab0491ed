"""infra/: the worker image, the compose stack, the Prefect deployments and the CI workflow.

Docker has no daemon and no compose plugin here (`docker compose` is not installed), so the
compose file is checked the way `docker compose config` would: its ``${VAR...}`` references are
interpolated with compose's rules (``_interpolate`` below) and the result is validated against
the Compose Specification's JSON schema, and the workflow against GitHub's workflow schema, both
as vendored by ``check-jsonschema`` (``vendor.compose-spec``, ``vendor.github-workflows``). Each
validation is shown to fail on a broken copy.

The ``server`` test registers infra/prefect.yaml with the compose service's own commands against
a real Prefect server, starts the compose worker command, and triggers a run with the CI
workflow's exact command.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "infra"
COMPOSE = INFRA / "compose.yaml"
PREFECT_YAML = INFRA / "prefect.yaml"
DOCKERFILE = INFRA / "Dockerfile"
WORKFLOW = INFRA / "ci" / "privatize.yml"
CHECK_SCRIPT = ROOT / "scripts" / "infra_check.py"
BIN = Path(sys.executable).parent

TRIGGER = 'python3 infra/ci/trigger.py "privatize/${PIPELINE}-scheduled" --timeout 3600'
PRIVGRAPH_SERVICES = {"prefect-server", "prefect-deploy", "prefect-worker", "dask-scheduler",
                      "dask-worker-1", "dask-worker-2"}
OTHER_SERVICES = {"postgres": "postgres:15", "minio": "minio/minio", "minio-init": "minio/mc"}
# variables that hold or name a credential, or without which the stack must not start
REQUIRED = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PREFECT_AUTH_STRING",
            "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "PRIVGRAPH_STORE", "PRIVGRAPH_DATA_DIR", "PRIVGRAPH_PIPELINES_FILE"}


def _load_check():
    spec = importlib.util.spec_from_file_location("infra_check", CHECK_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


infra_check = _load_check()


# --------------------------------------------------------------------------- compose's interpolation


class MissingVariable(Exception):
    pass


_INTERP = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", re.DOTALL)


def _interp_str(s: str, env: dict[str, str]) -> str:
    """Compose's interpolation of one value: $$, $VAR, ${VAR}, ${VAR:-d}, ${VAR-d}, ${VAR:?e},
    ${VAR?e}, ${VAR:+a}, ${VAR+a}. A ':?' on an unset or empty variable is an error."""

    def sub(m: re.Match[str]) -> str:
        if m.group("escaped"):
            return "$"
        if m.group("named"):
            return env.get(m.group("named"), "")
        mm = _BRACED.fullmatch(m.group("braced"))
        if mm is None:
            raise ValueError(f"invalid interpolation format: ${{{m.group('braced')}}}")
        name, op, arg = mm.groups()
        val = env.get(name)
        if op is None:
            return val or ""
        missing = (not val) if op.startswith(":") else (val is None)
        kind = op[-1]
        if kind == "-":
            return arg if missing else val  # type: ignore[return-value]
        if kind == "?":
            if missing:
                raise MissingVariable(f"required variable {name} is missing a value: {arg}")
            return val  # type: ignore[return-value]
        return "" if missing else arg  # '+'

    return _INTERP.sub(sub, s)


def _interpolate(obj: Any, env: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return _interp_str(obj, env)
    if isinstance(obj, dict):
        return {k: _interpolate(v, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_interpolate(v, env) for v in obj]
    return obj


_REF_NAMES = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}")


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _referenced(doc: Any) -> dict[str, set[str]]:
    """``{variable: {its operators}}`` over every ``${VAR...}`` in the values of a compose file
    (comments and keys are not interpolated)."""
    out: dict[str, set[str]] = {}
    for text in _strings(doc):
        for name, rest in _REF_NAMES.findall(text):
            out.setdefault(name, set()).add(rest[:2] if rest[:2] in (":?", ":-", ":+") else rest[:1])
    return out


def _dummy_env() -> dict[str, str]:
    """A value for each required variable (the others keep their defaults)."""
    env = {name: f"dummy-{name.lower()}" for name, ops in _referenced(_compose_raw()).items() if ":?" in ops}
    env.update(PRIVGRAPH_STORE="s3://private-graphs/prod", PRIVGRAPH_DATA_DIR="/srv/privgraph/data",
               PRIVGRAPH_PIPELINES_FILE="/srv/privgraph/pipelines.yaml")
    return env


def _compose_raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """compose.yaml as `docker compose config` would see it, with a dummy value for each variable."""
    return _interpolate(_compose_raw(), _dummy_env())


def _schema_check(schema: str, document: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with its vendored schema (no network)."""
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.fail("check-jsonschema is a test dependency of tests/test_infra.py: it ships the "
                    "compose-spec and GitHub workflow schemas (add check-jsonschema==0.39.0 to the lock)")
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(document)],
        check=False, capture_output=True, text=True, timeout=120,
    )


def _command_words(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


# --------------------------------------------------------------------------- compose


def test_interpolation_follows_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert _interp_str("a-$${X}-${SET}-$SET", env) == "a-${X}-v-v"
    assert _interp_str("${UNSET:-d}|${EMPTY:-d}|${EMPTY-d}|${SET:+alt}|${UNSET:+alt}", env) == "d|d||alt|"
    with pytest.raises(MissingVariable, match="EMPTY"):
        _interp_str("${EMPTY:?needed}", env)
    assert _interp_str("${EMPTY?needed}", env) == ""
    with pytest.raises(ValueError):
        _interp_str("${1BAD}", env)


def test_compose_validates_against_the_compose_spec(compose: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "compose.json"
    out.write_text(json.dumps(compose))
    res = _schema_check("vendor.compose-spec", out)
    assert res.returncode == 0, res.stdout + res.stderr
    raw = _schema_check("vendor.compose-spec", COMPOSE)  # and the file as written (anchors, ${...})
    assert raw.returncode == 0, raw.stdout + raw.stderr


@pytest.mark.parametrize("breakage", ["unknown service key", "bad depends_on condition", "healthcheck as string"])
def test_the_compose_schema_check_catches_a_broken_file(compose: dict[str, Any], tmp_path: Path,
                                                         breakage: str) -> None:
    broken = json.loads(json.dumps(compose))
    svc = broken["services"]["prefect-worker"]
    if breakage == "unknown service key":
        svc["enviroment"] = svc.pop("environment")
    elif breakage == "bad depends_on condition":
        svc["depends_on"]["minio-init"]["condition"] = "service_finished"
    else:
        svc["healthcheck"] = "curl localhost"
    out = tmp_path / "compose.json"
    out.write_text(json.dumps(broken))
    res = _schema_check("vendor.compose-spec", out)
    assert res.returncode != 0, f"{breakage}: accepted\n{res.stdout}"


def test_compose_refuses_to_start_without_each_credential() -> None:
    refs = _referenced(_compose_raw())
    assert REQUIRED <= set(refs), f"not referenced: {REQUIRED - set(refs)}"
    for name in sorted(REQUIRED):
        # every occurrence is ${VAR:?message}: no default, and a message that says what to set
        assert refs[name] == {":?"}, f"{name} is referenced as {refs[name]}; use ${{{name}:?message}}"
        for value in (None, ""):
            env = _dummy_env()
            if value is None:
                del env[name]
            else:
                env[name] = value
            with pytest.raises(MissingVariable, match=name):
                _interpolate(_compose_raw(), env)
    # with every one of them set, nothing else is required
    _interpolate(_compose_raw(), {n: "x" for n in REQUIRED})
    assert {n for n, ops in refs.items() if ":?" in ops} == REQUIRED


def test_every_privgraph_service_uses_the_worker_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == PRIVGRAPH_SERVICES | set(OTHER_SERVICES)
    image = {s["image"] for n, s in services.items() if n in PRIVGRAPH_SERVICES}
    assert len(image) == 1, image
    for name in PRIVGRAPH_SERVICES:
        svc = services[name]
        assert svc["build"] == {"context": "..", "dockerfile": "infra/Dockerfile"}, name
        assert (COMPOSE.parent / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
    for name, image_prefix in OTHER_SERVICES.items():
        svc = services[name]
        assert "build" not in svc and svc["image"].startswith(image_prefix), name
    # a service that runs prefect, dask or privgraph (as its command or in its script) is one of
    # ours, and each of ours runs one of them
    runs = re.compile(r"(?:^|\n|[;&|]|\|\|)\s*(prefect|dask|privgraph)\s")
    for name, svc in services.items():
        entry = svc.get("entrypoint") or []
        text = "\n".join([*(entry if isinstance(entry, list) else [entry]), *_command_words(svc)])
        assert bool(runs.search(text)) == (name in PRIVGRAPH_SERVICES), name


def test_compose_start_order_waits_for_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        for dep, how in (svc.get("depends_on") or {}).items():
            cond = how["condition"]
            if cond == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health: it has no healthcheck"
            elif cond == "service_completed_successfully":
                assert services[dep].get("restart") == "no", f"{dep} is one-shot: restart must be 'no'"
    assert services["prefect-server"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL" and "pg_isready" in \
        services["postgres"]["healthcheck"]["test"][1]
    assert services["minio-init"]["depends_on"] == {"minio": {"condition": "service_healthy"}}
    worker = services["prefect-worker"]["depends_on"]
    assert worker["prefect-deploy"]["condition"] == "service_completed_successfully"
    assert worker["minio-init"]["condition"] == "service_completed_successfully"
    assert worker["dask-scheduler"]["condition"] == "service_healthy"
    for w in ("dask-worker-1", "dask-worker-2"):
        assert services[w]["depends_on"]["dask-scheduler"]["condition"] == "service_healthy"
        assert "tcp://dask-scheduler:8786" in _command_words(services[w])


def test_prefect_server_runs_on_postgres_with_real_setting_names(compose: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import Settings

    server = compose["services"]["prefect-server"]["environment"]
    url = server["PREFECT_SERVER_DATABASE_CONNECTION_URL"]
    assert url.startswith("postgresql+asyncpg://") and "@postgres:5432/" in url
    worker = compose["services"]["prefect-worker"]["environment"]
    # each name is one Prefect 3.8 reads (a misspelt one would be ignored silently)
    monkeypatch.setenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", url)
    monkeypatch.setenv("PREFECT_SERVER_API_AUTH_STRING", server["PREFECT_SERVER_API_AUTH_STRING"])
    monkeypatch.setenv("PREFECT_UI_API_URL", server["PREFECT_UI_API_URL"])
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", worker["PREFECT_API_AUTH_STRING"])
    s = Settings()
    assert s.server.database.connection_url.get_secret_value() == url
    assert s.server.api.auth_string.get_secret_value() == server["PREFECT_SERVER_API_AUTH_STRING"]
    assert s.server.ui.api_url == server["PREFECT_UI_API_URL"]
    assert s.api.auth_string.get_secret_value() == server["PREFECT_SERVER_API_AUTH_STRING"]


def test_privgraph_environment_and_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker = services["prefect-worker"]
    env = worker["environment"]
    for key in ("PREFECT_API_URL", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                "AWS_DEFAULT_REGION", "PRIVGRAPH_STORE", "PRIVGRAPH_DATA_ROOT", "PRIVGRAPH_HOME"):
        assert env.get(key), key
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert env["PRIVGRAPH_STORE"].startswith("s3://")
    mounts = {}
    for v in worker["volumes"]:
        if isinstance(v, str):
            src, dst = v.split(":")[:2]
            mounts[dst] = {"type": "volume", "source": src}
        else:
            mounts[v["target"]] = v
    data = mounts[env["PRIVGRAPH_DATA_ROOT"]]
    assert data["type"] == "bind" and data.get("read_only") is True
    home = mounts[env["PRIVGRAPH_HOME"]]
    minio_volumes = {v.split(":")[0] for v in services["minio"]["volumes"]}
    assert home["type"] == "volume" and home["source"] in compose["volumes"]
    assert home["source"] not in minio_volumes, "the owner's key must not live in the object store"
    assert mounts["/opt/privgraph/pipelines.yaml"]["read_only"] is True
    assert mounts["/opt/privgraph/private-records"]["source"] not in minio_volumes
    # the Dask cluster holds private partitions: internal network, no published port
    for name in ("dask-scheduler", "dask-worker-1", "dask-worker-2"):
        assert services[name]["networks"] == ["compute"] and "ports" not in services[name]
        assert "environment" not in services[name], f"{name} needs no credential"
    assert compose["networks"]["compute"]["internal"] is True
    assert "compute" in worker["networks"]
    # every published port is bound to the loopback interface
    for name, svc in services.items():
        for p in svc.get("ports", []):
            assert str(p).startswith("127.0.0.1:"), f"{name} publishes {p} on every interface"


def test_env_example_names_every_variable_and_holds_no_value() -> None:
    refs = set(_referenced(_compose_raw()))
    example = (INFRA / ".env.example").read_text()
    named = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", example, re.MULTILINE))
    assert refs <= named, f"not in infra/.env.example: {sorted(refs - named)}"
    values = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", example, re.MULTILINE))
    for name in REQUIRED:
        assert values.get(name, "") == "", f"{name} has a value in .env.example"
    assert ".env" in (INFRA / ".gitignore").read_text().split()


def test_work_pool_is_the_same_everywhere(compose: dict[str, Any]) -> None:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    pool = doc["definitions"]["work_pool"]
    assert pool == {"name": "privgraph-process", "type": "process"}
    assert {d["work_pool"]["name"] for d in doc["deployments"]} == {pool["name"]}
    worker = _command_words(compose["services"]["prefect-worker"])
    assert worker[:3] == ["prefect", "worker", "start"]
    assert worker[worker.index("--pool") + 1] == pool["name"]
    assert worker[worker.index("--type") + 1] == pool["type"]
    script = _command_words(compose["services"]["prefect-deploy"])[-1]
    assert f"prefect work-pool create {pool['name']} --type {pool['type']}" in script
    assert "prefect --no-prompt deploy --all --prefect-file infra/prefect.yaml" in script


# --------------------------------------------------------------------------- prefect.yaml


def _run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK_SCRIPT), *args], check=False, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_infra_check_passes() -> None:
    res = _run_check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok privatize/cora-scheduled: cron '0 3 * * *' (UTC)" in res.stdout


def test_deployments_equal_those_generated_from_pipelines_yaml() -> None:
    from privgraph.config.loader import load_config

    cfg = load_config(ROOT / "pipelines.yaml")
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    assert doc == infra_check.expected_document(ROOT / "pipelines.yaml")
    expected = {f"{n}-scheduled": (p.schedule.cron, p.schedule.timezone) if p.schedule else None
                for n, p in cfg.pipelines.items()}
    assert infra_check.deployment_summary(doc) == expected
    assert expected["cora-scheduled"] == ("0 3 * * *", "UTC")  # the shipped schedule
    for d in doc["deployments"]:
        assert d["entrypoint"] == "flows/privatize.py:privatize_flow"
        assert set(d["parameters"]) == {"pipeline", "config_path"}
        assert d["name"] == f"{d['parameters']['pipeline']}-scheduled"


def test_deployments_agree_with_privgraph_serve() -> None:
    """`privgraph serve` (flows/schedule.py) and infra/prefect.yaml describe the same deployments,
    under distinct names (<pipeline>-served, <pipeline>-scheduled: neither route re-registers the
    other's), with the same concurrency limit."""
    import inspect

    from flows.privatize import privatize_flow
    from flows.schedule import pipeline_deployments
    from privgraph.config.loader import load_config

    cfg = load_config(ROOT / "pipelines.yaml")
    doc = {d["name"]: d for d in yaml.safe_load(PREFECT_YAML.read_text())["deployments"]}
    scheduled = [n for n, p in cfg.pipelines.items() if p.schedule is not None]
    assert scheduled
    for rd in pipeline_deployments(cfg, scheduled, "pipelines.yaml"):
        pipeline = rd.parameters["pipeline"]
        assert rd.name == f"{pipeline}-served" and rd.name not in doc
        d = doc[f"{pipeline}-scheduled"]
        assert rd.flow_name == privatize_flow.name == infra_check.FLOW_NAME
        assert rd.parameters == {**d["parameters"], "evaluate": True}
        assert (rd.concurrency_limit, rd.concurrency_options.collision_strategy.value) == (
            d["concurrency_limit"]["limit"], d["concurrency_limit"]["collision_strategy"])
        assert sorted(rd.tags) == sorted(d["tags"]) and rd.description == d["description"]
        [sched] = rd.schedules
        assert (sched.schedule.cron, sched.schedule.timezone) == (d["schedules"][0]["cron"],
                                                                  d["schedules"][0]["timezone"])
    params = inspect.signature(privatize_flow.fn).parameters
    assert {"pipeline", "config_path"} <= set(params)
    module, func = infra_check.ENTRYPOINT.split(":")
    assert (ROOT / module).is_file() and func == privatize_flow.fn.__name__


def test_prefect_version_is_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect

    assert prefect.__version__ == infra_check.PREFECT_VERSION
    lock = (ROOT / "requirements.txt").read_text()
    assert re.search(rf"^prefect=={re.escape(infra_check.PREFECT_VERSION)}\b", lock, re.MULTILINE)


def test_infra_check_fails_on_a_modified_pipelines_file(tmp_path: Path) -> None:
    text = (ROOT / "pipelines.yaml").read_text()
    assert 'cron: "0 3 * * *"' in text
    changed = tmp_path / "pipelines.yaml"
    changed.write_text(text.replace('cron: "0 3 * * *"', 'cron: "30 4 * * 1"'))
    res = _run_check("--config", str(changed))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "30 4 * * 1" in res.stderr and "does not match" in res.stderr
    # --write regenerates (into a copy here), and then the check passes
    out = tmp_path / "prefect.yaml"
    res = _run_check("--config", str(changed), "--prefect-file", str(out), "--write")
    assert res.returncode == 0, res.stdout + res.stderr
    assert infra_check.deployment_summary(yaml.safe_load(out.read_text()))["cora-scheduled"] == \
        ("30 4 * * 1", "UTC")
    # an invalid configuration is bad input, with the configuration's one-line message
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace('cron: "0 3 * * *"', 'cron: "every day"'))
    res = _run_check("--config", str(bad))
    assert res.returncode == 2 and "cron" in res.stderr


@pytest.mark.parametrize("edit", ["rename a deployment", "change a cron", "drop a deployment", "change a parameter"])
def test_infra_check_fails_on_a_modified_prefect_yaml(tmp_path: Path, edit: str) -> None:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    deps = doc["deployments"]
    if edit == "rename a deployment":
        deps[0]["name"] = "cora-nightly"
    elif edit == "change a cron":
        deps[0]["schedules"][0]["cron"] = "0 4 * * *"
    elif edit == "drop a deployment":
        deps.pop()
    else:
        deps[0]["parameters"]["config_path"] = "/etc/other.yaml"
    out = tmp_path / "prefect.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = _run_check("--prefect-file", str(out))
    assert res.returncode == 1, f"{edit}: passed\n{res.stdout}"
    assert "does not match" in res.stderr


# --------------------------------------------------------------------------- credentials


def test_no_credential_in_infra() -> None:
    assert infra_check.scan_credentials(INFRA) == []


@pytest.mark.parametrize("planted", [
    ("compose.yaml", "      POSTGRES_PASSWORD: hunter2hunter2"),
    ("compose.yaml", "      PREFECT_SERVER_DATABASE_CONNECTION_URL: "
                     "postgresql+asyncpg://prefect:s3cret@postgres:5432/prefect"),
    ("compose.yaml", "      MINIO_ROOT_USER: minioadmin"),
    (".env.example", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG"),
    (".env.example", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"),
    ("Dockerfile", "ENV PREFECT_API_KEY=pnu_0123456789abcdefghijklmnopqrstuvwx"),
    ("ci/privatize.yml", "      PREFECT_API_AUTH_STRING: admin:changeme"),
])
def test_the_credential_scan_catches_a_planted_value(tmp_path: Path, planted: tuple[str, str]) -> None:
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy)
    name, line = planted
    with (copy / name).open("a") as fh:
        fh.write("\n" + line + "\n")
    found = infra_check.scan_credentials(copy)
    assert found and all(name in f for f in found), found
    res = _run_check("--infra", str(copy))
    assert res.returncode == 1 and "credential" in res.stderr


# --------------------------------------------------------------------------- Dockerfile


def _instructions(path: Path) -> list[tuple[str, str]]:
    lines, buf = [], ""
    for raw in path.read_text().splitlines():
        s = raw.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        buf += " " + s[:-1] if s.endswith("\\") else " " + s
        if not s.endswith("\\"):
            word, _, rest = buf.strip().partition(" ")
            lines.append((word.upper(), " ".join(rest.split())))
            buf = ""
    return lines


def _pip_installs(instructions: list[tuple[str, str]]) -> list[str]:
    out = []
    for word, rest in instructions:
        if word == "RUN":
            for cmd in rest.split("&&"):
                cmd = " ".join(cmd.split())
                if "pip install" in cmd and "--upgrade" not in cmd:
                    out.append(cmd.split("pip install", 1)[1].strip())
    return out


def test_dockerfile_installs_the_torch_pair_first_then_the_lock_then_privgraph() -> None:
    ins = _instructions(DOCKERFILE)
    assert [r for w, r in ins if w == "FROM"] == ["python:3.11-slim"]
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    pins = re.search(r"pip install --quiet (?:-c \S+ )?(torch==\S+ torchvision==\S+)", setup.replace("$PIP", "pip"))
    assert pins, "scripts/setup.sh no longer installs the torch pair the way this test reads it"
    assert pins.group(1) == "torch==2.14.1 torchvision==0.29.1"
    assert "--require-hashes -r requirements.txt" in setup
    assert "--no-deps --require-hashes -r requirements-nodeps.txt" in setup
    assert _pip_installs(ins) == [pins.group(1), "--require-hashes -r requirements.txt",
                                  "--no-deps --require-hashes -r requirements-nodeps.txt", "--no-deps ."]
    order = [(w, r) for w, r in ins if w in ("COPY", "RUN")]
    copy_lock = order.index(("COPY", "requirements.txt requirements-nodeps.txt ./"))
    run_lock = next(i for i, (w, r) in enumerate(order) if w == "RUN" and "-r requirements.txt" in r)
    run_torch = next(i for i, (w, r) in enumerate(order) if w == "RUN" and "torch==" in r)
    assert run_torch < copy_lock < run_lock


def test_dockerfile_runs_as_a_non_root_user_and_holds_no_secret() -> None:
    ins = _instructions(DOCKERFILE)
    users = [r for w, r in ins if w == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert not [r for w, r in ins if w == "ARG"], "no build arguments: nothing secret is passed at build time"
    env_keys = " ".join(r for w, r in ins if w == "ENV")
    assert not re.search(r"(?i)(password|secret|token|api_key|access_key|auth_string)", env_keys)
    # the context filter: everything out, then only what the Dockerfile copies
    ignore = [ln.strip() for ln in (INFRA / "Dockerfile.dockerignore").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    assert ignore[0] == "**"
    included = {ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")}
    copied = set()
    for w, r in ins:
        if w == "COPY":
            copied.update(p.rstrip("/") for p in r.split()[:-1] if not p.startswith("--"))
    assert copied == included, (copied, included)
    assert not {"private-records", "artifacts", ".venv", ".env", "infra/.env"} & included


# --------------------------------------------------------------------------- CI workflow


def _workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def test_workflow_triggers_the_deployment_with_the_exact_command() -> None:
    wf = _workflow()
    on = wf.get("on", wf.get(True))  # PyYAML reads the key `on` as True
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["pipeline"]["required"] is True
    job = wf["jobs"]["deployment"]
    for key in ("PREFECT_API_URL", "PREFECT_API_KEY"):
        assert job["env"][key] == f"${{{{ secrets.{key} }}}}"
    runs = [s.get("run", "") for s in job["steps"]]
    assert TRIGGER in runs, runs
    # a light trigger: nothing installed (the full stack was installed to call one endpoint)
    assert not [r for r in runs if "setup.sh" in r or "pip " in r], runs
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["sparse-checkout"] == "infra/ci"
    # the input reaches the shell through the environment, never pasted into a script
    assert wf["env"]["PIPELINE"] == "${{ inputs.pipeline || 'cora' }}"
    for j in wf["jobs"].values():
        for s in j["steps"]:
            assert "inputs." not in s.get("run", ""), s


def test_workflow_shows_the_direct_form_on_the_owners_runner() -> None:
    job = _workflow()["jobs"]["direct"]
    assert "self-hosted" in job["runs-on"]
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'privgraph run "$PIPELINE" --ci' in script
    for code in ("0)", "2)", "3)", "4)"):
        assert code in script
    assert 'exit "$rc"' in script


def test_workflow_validates_against_githubs_schema(tmp_path: Path) -> None:
    res = _schema_check("vendor.github-workflows", WORKFLOW)
    assert res.returncode == 0, res.stdout + res.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("    runs-on: ubuntu-latest\n", "    run-on: ubuntu-latest\n"))
    assert broken.read_text() != WORKFLOW.read_text()
    res = _schema_check("vendor.github-workflows", broken)
    assert res.returncode != 0, res.stdout


# --------------------------------------------------------------------------- a real Prefect server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _docs_block(first_line: str, doc: str = "docs/production.md") -> str:
    """The bash code block of ``doc`` (the production guide, linked from the README) whose first
    line starts with ``first_line``, as written."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {url} answered:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {timeout} s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def _process(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> Any:
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.server
def test_compose_commands_register_and_run_the_deployments(tmp_path: Path, compose: dict[str, Any]) -> None:
    """prefect-deploy's script registers infra/prefect.yaml (twice: it is idempotent); the
    "Without Docker" block of docs/production.md, run verbatim from the checkout, deploys, starts a worker and runs
    sbm-demo to a published version (its pull step hard-coded /opt/privgraph until issue 27, and
    this test ran a rewritten copy); the CI workflow's light trigger (REST API, no install) runs
    it again with that worker; the compose worker is the block's command."""
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    # the server's scheduler would insert up to 100 future runs for each of the ~20 deployments
    # registered here; on a loaded 2-core machine that transaction held the SQLite lock for 60 s while
    # the first run waited (scheduled runs are tested in tests/flows/test_schedule.py)
    server_env = {**{k: v for k, v in env.items() if k != "PREFECT_API_URL"},
                  "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"}
    with _process([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                  server_env, tmp_path / "server.log", tmp_path) as server:
        _wait_http(f"{api}/health", server, tmp_path / "server.log", 180)

        # 1. the compose prefect-deploy script, verbatim, from the repository root (the image's WORKDIR)
        script = _command_words(compose["services"]["prefect-deploy"])[-1]
        for attempt in (1, 2):
            res = subprocess.run(["sh", "-ec", script], env=env, cwd=ROOT, check=False,
                                 capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, (
                f"prefect-deploy (attempt {attempt}) failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}\n"
                "(a 422 on .../filter with 'limit': None is FastAPI >= 0.151 against Prefect 3.8's server)")

        import asyncio

        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        async def deployments() -> dict[str, Any]:
            async with get_client() as client:
                return {d.name: d for d in await client.read_deployments()}

        with temporary_settings({PREFECT_API_URL: api}):
            registered = asyncio.run(deployments())
        expected = yaml.safe_load(PREFECT_YAML.read_text())
        assert set(registered) == {d["name"] for d in expected["deployments"]}
        for d in expected["deployments"]:
            r = registered[d["name"]]
            assert r.entrypoint == d["entrypoint"] and r.parameters == d["parameters"]
            assert r.work_pool_name == "privgraph-process" and r.pull_steps == expected["pull"]
            # one run of a pipeline at a time, a colliding run cancelled (issue 27)
            assert r.global_concurrency_limit is not None and r.global_concurrency_limit.limit == 1, r
            assert r.concurrency_options is not None and r.concurrency_options.collision_strategy.value == "CANCEL_NEW"
            got = [(s.schedule.cron, s.schedule.timezone) for s in r.schedules]
            assert got == [(s["cron"], s["timezone"]) for s in d["schedules"]]

        # 2. docs/production.md's "Without Docker" block, verbatim, from the repository root: it deploys
        #    again (the pull step resolved to this checkout), starts a worker and runs sbm-demo as
        #    shipped; the store and the owner's keys go to tmp_path through the environment
        block = _docs_block("export PRIVGRAPH_WORKDIR=")
        records = ROOT / "private-records" / "sbm-demo"
        before = set(records.glob("*")) if records.is_dir() else set()
        run_env = {**env, "PRIVGRAPH_STORE": str(tmp_path / "store"), "PRIVGRAPH_HOME": str(tmp_path / "owner-home")}
        log = tmp_path / "readme-block.log"
        with log.open("w") as fh:  # a file, not a pipe: the worker it leaves running holds its output open
            proc = subprocess.Popen(["bash", "-ec", block], env=run_env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            code = proc.wait(timeout=900)  # the block ends when `deployment run --watch` returns
            if code == 0:
                # 3. the CI workflow's light trigger, verbatim (REST API, standard library only),
                #    with the worker the block left running: a second version; then a deployment
                #    that does not exist (exit 2) and an API that does not answer (exit 4)
                trig_env = {k: v for k, v in run_env.items() if not k.startswith("PRIVGRAPH_WORKDIR")}
                trig = subprocess.run(["bash", "-c", TRIGGER], env={**trig_env, "PIPELINE": "sbm-demo"}, cwd=ROOT,
                                      check=False, capture_output=True, text=True, timeout=600)
                assert trig.returncode == 0 and "finished in state Completed" in trig.stdout, (
                    trig.stdout[-3000:] + trig.stderr[-3000:] + log.read_text()[-4000:])
                trig = subprocess.run(["bash", "-c", TRIGGER], env={**trig_env, "PIPELINE": "nosuch"}, cwd=ROOT,
                                      check=False, capture_output=True, text=True, timeout=120)
                assert trig.returncode == 2 and "no deployment 'privatize/nosuch-scheduled'" in trig.stderr, trig.stderr
                dead = {**trig_env, "PIPELINE": "sbm-demo", "PREFECT_API_URL": f"http://127.0.0.1:{_free_port()}/api"}
                # a silent API is asked again for --api-retry-seconds (120 s by default; the retries
                # are tested in tests/test_ci_trigger.py): 5 s here
                trig = subprocess.run(["bash", "-c", f"{TRIGGER} --api-retry-seconds 5"], env=dead, cwd=ROOT, check=False,
                                      capture_output=True, text=True, timeout=120)
                assert trig.returncode == 4 and "did not answer" in trig.stderr, trig.stderr
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):  # the worker it started in the background
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                time.sleep(2)
            for leftover in (set(records.glob("*")) if records.is_dir() else set()) - before:
                leftover.unlink()  # the run's private record (./private-records of the checkout)
        out = log.read_text()
        assert code == 0, out[-6000:]
        assert "Flow run finished successfully in 'Completed'" in out, out[-6000:]
        versions = list((tmp_path / "store" / "sbm-demo").glob("*/manifest.json"))
        assert len(versions) == 2, "the docs block's run and the CI trigger's each published one version"
        # the compose worker is the docs block's (the image has the venv on PATH and sets PRIVGRAPH_WORKDIR)
        lines = [[w for w in shlex.split(line) if w != "&"] for line in block.splitlines()]
        worker = next(w for w in lines if w[1:3] == ["worker", "start"])
        assert _command_words(compose["services"]["prefect-worker"])[:len(worker)] == ["prefect", *worker[1:]]
