"""The Prefect UI tells the story: a real server, a real pipeline run, the real UI in headless Chromium.

The run is named ``<pipeline>/<version>`` and tagged (checked through the API and on the page);
its Artifacts tab shows the ledger and the metrics (the release: what the manifest holds), and
their pages render the ledger's epsilons and the shareable accuracy. Screenshots go to
``$PRIVGRAPH_TEST_ARTIFACTS`` (else the test's tmp_path); their paths are printed.

Needs Debian's ``chromium`` (``apt-get install chromium``; ``$PRIVGRAPH_CHROMIUM`` names another
binary): the test skips, saying so, when it is absent. Playwright drives it through
``executable_path`` (no browser download).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.flow, pytest.mark.server, pytest.mark.browser]

PIPELINE = "ui-demo"


def _chromium() -> str:
    path = os.environ.get("PRIVGRAPH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("chromium is not installed (apt-get install chromium, or set PRIVGRAPH_CHROMIUM)")
    return path


def _config(tmp: Path) -> Path:
    p = {
        "dataset": {"name": "sbm", "rho": 0.2, "options": {"num_nodes": 400, "num_features": 8}},
        "features": {"mechanism": "feature_rr", "epsilon": 2.0, "bins": 4},
        "edges": {"mechanism": "dprr", "epsilon": 1.5},
        "budget": {"features": 2.0, "edges": 3.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "seed": 11,
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
        "evaluate": {"runs": 1, "epochs": 5, "patience": None},
    }
    path = tmp / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {PIPELINE: p}}))
    return path


def _shots(tmp_path: Path) -> Path:
    env = os.environ.get("PRIVGRAPH_TEST_ARTIFACTS")
    folder = Path(env) / "prefect-ui" if env else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def _post(path: str, body: dict) -> list[dict]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        r = await client._client.post(path, json=body)
        r.raise_for_status()
        return r.json()


def test_the_flow_run_page_shows_its_name_tags_ledger_and_metrics(tmp_path, monkeypatch):
    chromium = _chromium()
    from playwright.sync_api import sync_playwright
    from prefect.settings import PREFECT_API_URL, temporary_settings

    import tests.prefect_server as ps
    from flows.privatize import privatize_flow
    from privgraph.evaluate.progress import ProgressEvent, listening

    # the UI asks the server's /ui-settings where the API is: without PREFECT_UI_API_URL it says
    # 127.0.0.1:4200, not the test server's port (prefect_server picks the port: pin it first)
    port = ps.free_port()
    monkeypatch.setattr(ps, "free_port", lambda: port)
    monkeypatch.setenv("PREFECT_UI_API_URL", f"http://127.0.0.1:{port}/api")
    shots = _shots(tmp_path)
    cfg = _config(tmp_path)
    with ps.prefect_server(tmp_path) as server, temporary_settings({PREFECT_API_URL: server.url}):
        events: list[ProgressEvent] = []
        with listening(events.append):  # what the CLI's progress bar is fed
            res = privatize_flow(pipeline=PIPELINE, config_path=str(cfg))
        version, name = res["version"], f"{PIPELINE}/{res['version']}"
        # one run: the clean graph, the version, its feature-only floor and its public edges alone
        assert [(e.task, e.done, e.total) for e in events] == [("training", k, 4) for k in range(5)]

        # through the API: the run's name and tags, the subflow's name, the artifacts on the run
        (run,) = asyncio.run(_post("/flow_runs/filter", {"flow_runs": {"name": {"any_": [name]}}, "limit": 5}))
        tags = ["privgraph", f"pipeline:{PIPELINE}", "mechanism:feature_rr", "mechanism:dprr",
                "scope:features", "scope:edges"]
        assert sorted(run["tags"]) == sorted(tags) and run["state_type"] == "COMPLETED"
        (sub,) = asyncio.run(_post("/flow_runs/filter", {"flow_runs": {"name": {"any_": [f"{name}/evaluate"]}}}))
        assert sub["parent_task_run_id"] is not None
        keyed = [a for a in asyncio.run(_post("/artifacts/filter", {
            "artifacts": {"flow_run_id": {"any_": [run["id"]]}}, "limit": 50})) if a["key"]]
        assert {a["key"] for a in keyed} == {f"{PIPELINE}-ledger", f"{PIPELINE}-metrics"}

        # the real UI in headless Chromium
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=["--no-sandbox", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(60_000)
                page.goto(f"{server.ui}/runs/flow-run/{run['id']}?tab=Artifacts")
                page.get_by_text(name, exact=True).first.wait_for()  # the page header: the renamed run
                for tag in tags:
                    page.get_by_text(tag, exact=True).first.wait_for()
                page.locator("#artifacts").click()  # the Artifacts tab
                tab = page.locator("#artifacts-content")
                tab.get_by_text(f"{PIPELINE}-metrics", exact=True).wait_for()
                text = tab.inner_text()
                assert f"{PIPELINE}-ledger" in text
                assert f"privacy ledger of {PIPELINE} {version}" in text
                assert f"utility of {PIPELINE} {version} (from the stored version only)" in text
                assert "private-evaluation" not in text and "PRIVATE" not in text  # on the evaluate subflow only
                page.wait_for_load_state("networkidle")  # fade-ins and late requests done
                page.screenshot(path=str(shots / "flow-run-artifacts.png"), full_page=True)

                # the published ledger's page: the markdown rendered, with the epsilons
                tab.get_by_text(f"privacy ledger of {PIPELINE} {version}", exact=True).click()
                page.get_by_text(f"Privacy ledger: {PIPELINE} {version}").wait_for()
                body = page.inner_text("body")
                for cell in ("privatize.features", "feature_rr", "feature_ldp", "privatize.edges", "dprr",
                             "edge_ldp", "1.5", "edge_dp 3", "Validation checkpoint"):
                    assert cell in body, cell
                page.wait_for_load_state("networkidle")  # fade-ins and late requests done
                page.screenshot(path=str(shots / "ledger-artifact.png"), full_page=True)

                # the metrics' page: the shareable accuracy, as in the manifest
                page.go_back()
                page.locator("#artifacts").click()
                page.locator("#artifacts-content").get_by_text(f"{PIPELINE}-metrics", exact=True).click()
                page.get_by_text(f"Utility: {PIPELINE} {version}").wait_for()
                body = page.inner_text("body")
                assert f"{res['metrics']['private']['test_acc_mean']:.4f}" in body
                assert "clean" not in body.lower()
                page.wait_for_load_state("networkidle")  # fade-ins and late requests done
                page.screenshot(path=str(shots / "metrics-artifact.png"), full_page=True)
            finally:
                browser.close()
    print(f"screenshots of the Prefect UI: {shots}")
