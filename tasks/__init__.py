"""Prefect tasks: one per pipeline stage, each a thin wrapper over one library call.

Tasks that touch raw data or seeds never cache or persist results (``NO_CACHE``,
``persist_result=False``): Prefect's result store must never hold the raw graph. Only the storage
task retries (it is the one doing network I/O against an object store).
"""
