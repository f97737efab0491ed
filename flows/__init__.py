"""Prefect flows: privatize (ingest -> partition -> privatize -> validate -> store) and evaluate.

The flows are imported where they are used (``flows.privatize``, ``flows.evaluate``): a run with
``--no-evaluate`` or one refused before training then never imports the model libraries (torch,
PyG: about 6 s of a CLI process here).
"""

from __future__ import annotations

from typing import Any

__all__ = ["evaluate_flow", "privatize_flow"]


def __getattr__(name: str) -> Any:
    if name == "evaluate_flow":
        from flows.evaluate import evaluate_flow  # lazy: torch and PyG, only where a model trains

        return evaluate_flow
    if name == "privatize_flow":
        from flows.privatize import privatize_flow  # lazy: prefect, imported only when a flow runs

        return privatize_flow
    raise AttributeError(f"module 'flows' has no attribute {name!r}")
