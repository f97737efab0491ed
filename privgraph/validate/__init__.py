"""Validation checkpoints run before an artifact is published."""

from privgraph.validate.checkpoint import (ValidationReport, budget_failures, enforce, run_checkpoint,
                                          run_checkpoint_from_summaries)

__all__ = ["ValidationReport", "budget_failures", "enforce", "run_checkpoint", "run_checkpoint_from_summaries"]
