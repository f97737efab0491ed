"""Seeds and generators: one ``SeedSequence`` per run, named children per stage, spawned per partition.

A seed lets anyone who also holds the raw data replay the noise, so seeds never enter a published
artifact. With no seed, the run's root sequence is drawn from OS entropy. No global random state
is touched anywhere in privgraph.

Two kinds of generator:

* :func:`noise_generator` draws the privacy noise. It is a numpy ``Generator`` over AES-128 in
  counter mode (randomgen's ``AESCounter``), a cryptographically secure generator: its output
  does not reveal its key, so noise drawn in one part of a run says nothing about another part's,
  and outputs cannot be extrapolated (PCG64's can). Seeded from the run's ``SeedSequence`` (OS
  entropy by default, or the configured ``seed``, which keeps a run reproducible for whoever holds
  the configuration). With AES-NI (every x86-64 server of the last decade) it costs about one
  PCG64 draw per draw (``benchmarks/csprng.py``); without, randomgen's software AES gives the
  SAME stream about 35x slower. ChaCha20 was measured too (4.3x PCG64 per uniform here).
* :func:`as_generator` (PCG64) draws PUBLIC randomness: simulated public/private splits, node
  splits, synthetic graphs, public subset selections. These are dataset definitions: the same
  seed must give the same split across privgraph versions.
"""

from __future__ import annotations

import hashlib
import numbers
import zlib
from typing import Any

import numpy as np

__all__ = ["as_seed_sequence", "as_generator", "noise_generator", "stage_seed", "partition_seeds", "one_way_entropy",
           "NOISE_BIT_GENERATOR"]

#: the bit generator behind :func:`noise_generator` (recorded in the run's private record)
NOISE_BIT_GENERATOR = "randomgen.AESCounter (AES-128-CTR)"


def as_seed_sequence(seed: Any) -> np.random.SeedSequence:
    """``None`` -> fresh OS entropy; an int >= 0 or a SeedSequence -> a reproducible sequence."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise TypeError(f"seed must be None, a non-negative int or a SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def as_generator(seed: Any) -> np.random.Generator:
    """A ``numpy.random.Generator`` (PCG64) from a seed, a SeedSequence, or a Generator (returned as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(as_seed_sequence(seed))


def noise_generator(seed: Any) -> np.random.Generator:
    """The generator of privacy noise: ``numpy.random.Generator(AESCounter(seed))``.

    ``seed`` is ``None`` (fresh OS entropy), an int >= 0 or a ``SeedSequence`` (the AES key and
    counter are derived by ``SeedSequence.generate_state``); the same seed gives the same stream
    on every machine (with or without AES-NI). A ``Generator`` passed in is returned as is.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    from randomgen import AESCounter  # lazy: randomgen (~20 ms), only where privacy noise is drawn

    return np.random.Generator(AESCounter(seed=as_seed_sequence(seed)))


def stage_seed(root: np.random.SeedSequence, name: str) -> np.random.SeedSequence:
    """The child sequence of ``root`` for a named stage (e.g. ``"features"``).

    Keyed by the name, not by call order, so adding a stage never shifts another stage's noise.

    >>> root = np.random.SeedSequence(7)
    >>> stage_seed(root, "edges").generate_state(1) == stage_seed(root, "edges").generate_state(1)
    array([ True])
    >>> bool(stage_seed(root, "edges").generate_state(1)[0] == stage_seed(root, "features").generate_state(1)[0])
    False
    """
    key = zlib.crc32(name.encode("utf-8"))
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + (key,))


def one_way_entropy(seed: Any, name: str) -> int | None:
    """A 63-bit entropy for a stage whose seed may be SEEN, derived one way from the run's seed.

    A Prefect flow parameter is stored in the API's database and shown in the UI; the run's seed
    is secret (its children seed the privacy noise: knowing it de-randomizes every release of the
    run). So a subflow gets 63 bits of ``SHA-256(name | root entropy | spawn key)`` instead (63:
    Prefect's API reads a JSON integer of 64 bits at most back, and a larger one breaks every
    listing of flow runs): the same seed gives the same value (reproducible evaluation), and the
    value reveals nothing of the seed. ``None`` (fresh OS entropy) stays ``None``.
    """
    if seed is None:
        return None
    ss = as_seed_sequence(seed)
    h = hashlib.sha256(f"privgraph.one-way/1|{name}|{ss.entropy}|{tuple(ss.spawn_key)}".encode())
    return int.from_bytes(h.digest()[:8], "big") >> 1


def partition_seeds(stage: np.random.SeedSequence, num_parts: int) -> list[np.random.SeedSequence]:
    """Per-partition sequences: child ``i`` of ``stage`` for partition ``i``.

    Built from the spawn key directly (not ``stage.spawn``, which mutates its counter) so that
    calling it twice, or on a retried task, gives the same seeds: a retry re-draws nothing new.

    >>> stage = np.random.SeedSequence(7)
    >>> [s.spawn_key for s in partition_seeds(stage, 3)]
    [(0,), (1,), (2,)]
    """
    return [
        np.random.SeedSequence(stage.entropy, spawn_key=tuple(stage.spawn_key) + (i,))
        for i in range(num_parts)
    ]
