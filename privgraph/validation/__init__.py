"""Validation checkpoints run before an artifact is published."""

from privgraph.validation.checkpoint import ValidationReport, enforce, run_checkpoint

__all__ = ["ValidationReport", "enforce", "run_checkpoint"]
