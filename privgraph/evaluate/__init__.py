"""Evaluate: what a version is worth and what an adversary recovers: training, models, the public-only reference, post-processing, comparisons, attacks and the structure report.

The modules are imported by their full path; this package imports nothing."""
