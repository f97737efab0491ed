"""Noise comes from a cryptographically secure generator; a configured seed stays reproducible."""

from __future__ import annotations

import numpy as np
from randomgen import AESCounter

from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.mechanisms import build_mechanism
from privgraph.parts.executor import SerialExecutor
from privgraph.parts.partition import partition_graph
from privgraph.privatize.release import privatize_graph
from privgraph.seeding import as_generator, noise_generator, partition_seeds, stage_seed


def test_noise_generator_is_aes_counter_and_seeded_streams_repeat():
    g = noise_generator(7)
    assert isinstance(g.bit_generator, AESCounter)
    assert np.array_equal(g.random(5), noise_generator(np.random.SeedSequence(7)).random(5))
    assert not np.array_equal(noise_generator(None).random(5), noise_generator(None).random(5))  # OS entropy
    assert not np.array_equal(noise_generator(7).random(5), as_generator(7).random(5))  # not PCG64
    # the same stream without AES-NI (software AES): reproducible on every machine
    bg = AESCounter(seed=np.random.SeedSequence(7))
    bg.use_aesni = False
    assert np.array_equal(np.random.Generator(bg).random(5), noise_generator(7).random(5))
    passed = np.random.default_rng(0)
    assert noise_generator(passed) is passed


def test_a_seeded_privatization_draws_from_the_csprng_and_repeats():
    graph = sbm_graph(300, num_classes=2, num_features=6, seed=1)
    mech = build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4})
    parts = partition_graph(graph, 3, "hash")
    root = np.random.SeedSequence(11)
    run = lambda: privatize_graph(graph, features=mech, edges=None, partitioning=parts,  # noqa: E731
                                  root_seed=root, executor=SerialExecutor()).graph.x
    a, b = run(), run()
    assert np.array_equal(a, b)
    # partition i draws from AESCounter seeded with its own spawned sequence
    seeds = partition_seeds(stage_seed(root, "features"), len(parts.parts))
    for p, s in zip(parts.parts, seeds, strict=True):
        assert np.array_equal(a[p], mech.privatize_rows(graph.x[p], noise_generator(s)))
        assert not np.array_equal(a[p], mech.privatize_rows(graph.x[p], np.random.default_rng(s)))
