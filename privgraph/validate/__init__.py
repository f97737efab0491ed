"""Validation checkpoints run before an artifact is published."""

from privgraph.validate.checkpoint import ValidationReport, budget_failures, enforce, run_checkpoint

__all__ = ["ValidationReport", "budget_failures", "enforce", "run_checkpoint"]
