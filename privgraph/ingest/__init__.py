"""Ingest: the datasets, image embeddings and HeteroRR's importance and sensitivity scores; everything that reads the owner's raw input.

The modules are imported by their full path; this package imports nothing."""
