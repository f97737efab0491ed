"""Prefect flows: privatize (ingest -> partition -> privatize -> validate -> store) and evaluate."""

from flows.evaluate import evaluate_flow
from flows.privatize import privatize_flow

__all__ = ["evaluate_flow", "privatize_flow"]
