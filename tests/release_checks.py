"""What the non-interference test checks INSIDE the objects of one run (issue 42).

Comparing two neighbouring runs cannot see a leak written into the object that the covering
mechanism outputs: that object may change between them. So every run is also checked on its own,
against its input and the documented formats, by an auditor that uses none of privgraph's writers:

* :func:`canonical_violations`: every stored object (and manifest.json) is byte for byte the
  DOCUMENTED encoding of what loads from it (generic readers, then the recipe of
  ``privgraph/storage/graph_io.py``'s docstring re-stated here): no free metadata, no extra array,
  zip entry or column, fixed compression settings, exactly the documented fields and dtypes.
* :func:`release_violations`: each scope's stored output is what its mechanism says it is.

  - statistic plus noise (``class_counts``, ``gap``): the exact statistic recomputed from the
    run's INPUT (its private edges) plus the noise drawn from the stage's seed through the audited
    samplers (:func:`~privgraph.mechanisms.noise.discrete_laplace`,
    :func:`~privgraph.mechanisms.gaussian_noise.discrete_gaussian`); hop 0 (the public classes or
    GAP's encoding) recomputed from the stored version's released data, as the flow does;
  - sampling mechanisms (FeatureRR, Piecewise, multi-bit, label RR, DPRR, EdgeRR, ...): the
    output decodes to exactly the documented form (each value in the mechanism's public output
    set, the documented number of reported entries per row, released edges between nodes of
    V_pri, public parts released as they are) and nothing else;
  - a scope that the pipeline leaves public is stored exactly as the input has it.

What a black box cannot see: a value hidden inside a sampling mechanism's output that stays in its
documented output set (e.g. one more false edge, a bin chosen from private data). That is the
mechanisms' own tests' job: each mechanism's statistical test of its guarantee
(``tests/mechanisms``), its randomness from the Generator passed in only, and seeded replay.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privgraph.graph import GraphData

#: an .npy object (after a partition's ``part-<i>.`` prefix): its dtype and number of dimensions
NPY_FORMAT = {"features.npy": ("<f4", (2,)), "labels.npy": ("<i8", (1, 2)), "aggregates.npy": ("<f4", (3,)),
              "nodes.npy": ("<i8", (1,))}
SPLIT_ENTRIES = ("test_mask.npy", "train_mask.npy", "val_mask.npy")
EDGE_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("kind", pa.string())])
GRAPH_KEYS = {"privgraph.graph/1": {"format", "num_nodes", "objects"},
              "privgraph.graph/2": {"format", "num_nodes", "objects", "parts"}}
_PART = re.compile(r"^part-(\d{5})\.(.+)$")


# -- canonical objects --------------------------------------------------------------------------------
def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _decode(base: str, blob: bytes) -> tuple[Any, bytes]:
    """``(content, documented encoding of the content)`` of one object, by its base name; raises
    ValueError on anything the format does not document."""
    if base in NPY_FORMAT:
        a = np.load(io.BytesIO(blob), allow_pickle=False)
        dtype, ndims = NPY_FORMAT[base]
        if a.dtype.str != dtype or a.ndim not in ndims:
            raise ValueError(f"{a.dtype.str} [{a.ndim}-D], the format has {dtype} {ndims}-D")
        return a, _npy(np.ascontiguousarray(a))
    if base == "splits.npz":
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            names = zf.namelist()
            if sorted(names) != names or not set(names) <= set(SPLIT_ENTRIES) or len(set(names)) != len(names):
                raise ValueError(f"entries {names}, the format has a subset of {list(SPLIT_ENTRIES)}")
            masks = {n[:-4]: np.load(io.BytesIO(zf.read(n)), allow_pickle=False) for n in names}
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zf:
            for n, m in masks.items():
                if m.dtype != np.bool_ or m.ndim != 1:
                    raise ValueError(f"{n}: {m.dtype} [{m.ndim}-D], the format has bool 1-D")
                entry = zipfile.ZipInfo(f"{n}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                entry.compress_type, entry.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
                zf.writestr(entry, _npy(m))
        return masks, out.getvalue()
    if base == "edges.parquet":
        table = pq.ParquetFile(pa.BufferReader(blob)).read(use_threads=False)
        if not table.schema.equals(EDGE_SCHEMA, check_metadata=False):
            raise ValueError(f"schema {table.schema.names} {[str(t) for t in table.schema.types]}")
        kind = table.column("kind").to_pylist()
        if set(kind) - {"public", "private"}:
            raise ValueError("edge kinds other than public and private")
        edges = np.stack([table.column("src").to_numpy(), table.column("dst").to_numpy()]).astype(np.int64)
        public = np.array([k == "public" for k in kind], dtype=bool)
        pub, pri = (_sorted(edges[:, m]) for m in (public, ~public))
        ref = pa.table({"src": pa.array(np.concatenate([pub[0], pri[0]]), pa.int64()),
                        "dst": pa.array(np.concatenate([pub[1], pri[1]]), pa.int64()),
                        "kind": pa.array(["public"] * pub.shape[1] + ["private"] * pri.shape[1], pa.string())})
        out = io.BytesIO()
        pq.write_table(ref, out, compression="zstd")
        return (pub, pri), out.getvalue()
    if base == "graph.json":
        info = json.loads(blob)
        keys = GRAPH_KEYS.get(info.get("format") if isinstance(info, dict) else None)
        if keys is None or set(info) != keys:
            raise ValueError(f"keys {sorted(info) if isinstance(info, dict) else type(info).__name__}")
        return info, (json.dumps(info, sort_keys=True) + "\n").encode()
    raise ValueError("not an object the format documents")


def _sorted(e: np.ndarray) -> np.ndarray:
    return e[:, np.lexsort((e[1], e[0]))]


def decode_objects(objects: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
    """Every object decoded (by name) and the violations: an object that is not the documented
    encoding of its content, or that its version's graph.json does not list."""
    decoded, out = {}, []
    for name, blob in sorted(objects.items()):
        m = _PART.match(name)
        try:
            content, ref = _decode(m.group(2) if m else name, blob)
        except (ValueError, OSError, KeyError, zipfile.BadZipFile, pa.ArrowException) as err:
            out.append(f"objects: {name} does not decode to the documented fields ({err})")
            continue
        if ref != blob:
            out.append(f"objects: {name} is not the canonical encoding of what loads from it "
                       f"({len(blob)} bytes stored, {len(ref)} documented)")
        decoded[name] = content
    info = decoded.get("graph.json")
    if info is not None and sorted(objects) != sorted({*info["objects"], "graph.json"}):
        out.append(f"objects: stored {sorted(objects)}, graph.json lists {sorted(info['objects'])}")
    return decoded, out


def canonical_violations(run: dict[str, Any]) -> list[str]:
    """Every object of a published run and its manifest.json, checked (see the module)."""
    _, out = decode_objects(run["objects"])
    raw = run["manifest_bytes"]
    if raw != (json.dumps(json.loads(raw), sort_keys=True, indent=2, allow_nan=False) + "\n").encode():
        out.append("objects: manifest.json is not the canonical encoding of the manifest")
    return out


def stored_graph(objects: dict[str, bytes]) -> GraphData:
    """The version's graph, from the auditor's own decoding (a partitioned version assembled by
    its parts' node ids)."""
    decoded, problems = decode_objects(objects)
    assert not problems, problems
    info = decoded["graph.json"]
    n = info["num_nodes"]
    fields: dict[str, Any] = {}
    if info.get("parts"):
        pre = [f"part-{i:05d}." for i in range(info["parts"])]
        nodes = [decoded[p + "nodes.npy"] for p in pre]
        for key, field in (("features.npy", "x"), ("labels.npy", "y"), ("aggregates.npy", "aggregates")):
            if pre[0] + key in decoded:
                first = decoded[pre[0] + key]
                full = np.empty((n, *first.shape[1:]), first.dtype)
                for p, ids in zip(pre, nodes):
                    full[ids] = decoded[p + key]
                fields[field] = full
        for mask in ("train_mask", "val_mask", "test_mask"):
            if pre[0] + "splits.npz" in decoded and mask in decoded[pre[0] + "splits.npz"]:
                full = np.zeros(n, bool)
                for p, ids in zip(pre, nodes):
                    full[ids] = decoded[p + "splits.npz"][mask]
                fields[mask] = full
        pub = _sorted(np.concatenate([decoded[p + "edges.parquet"][0] for p in pre], axis=1))
        pri = _sorted(np.concatenate([decoded[p + "edges.parquet"][1] for p in pre], axis=1))
    else:
        for key, field in (("features.npy", "x"), ("labels.npy", "y"), ("aggregates.npy", "aggregates")):
            if key in decoded:
                fields[field] = decoded[key]
        fields.update(decoded.get("splits.npz", {}))
        pub, pri = decoded["edges.parquet"]
    return GraphData(num_nodes=n, edges_public=pub, edges_private=pri, **fields)


# -- mechanism outputs ----------------------------------------------------------------------------------
def _unit(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Is each float32 value one of ``points`` (float64) as float32?"""
    return np.isin(values, np.unique(points.astype(np.float32)))


def _feature_form(name: str, params: dict[str, Any], x: np.ndarray) -> list[str]:
    """The documented output set of a feature mechanism, checked on every entry and row."""
    from privgraph.mechanisms import build_mechanism
    from privgraph.mechanisms.features.scaled import split_epsilon

    mech = build_mechanism(name, params)
    n, d = x.shape
    if name == "feature_rr":  # bin j of k released as j / k (scaled units), j = 1..k
        ok = _unit(x, np.arange(1, mech.bins + 1) / mech.bins)
        return [] if ok.all() else [f"features: {int((~ok).sum())} entries outside FeatureRR's {mech.bins} bin values"]
    lower = np.broadcast_to(np.asarray(mech.lower, np.float64), (d,))
    upper = np.broadcast_to(np.asarray(mech.upper, np.float64), (d,))
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    centre = x == mid.astype(np.float32)
    if name == "multibit":  # m entries of a row at mid +- half (d / m) / tanh(eps_m / 2), the rest at mid
        m = mech.num_sampled(d)
        gain = (d / m) / math.tanh(split_epsilon(mech.epsilon, m) / 2.0)
        hit = (x == (mid + half * gain).astype(np.float32)) | (x == (mid - half * gain).astype(np.float32))
        out = [] if (hit | centre).all() else [f"features: {int((~(hit | centre)).sum())} entries outside multi-bit's three values"]
        return out + ([] if np.all(hit.sum(axis=1) == m) else [f"features: rows without exactly m = {m} reported entries"])
    if name == "piecewise":  # k entries of a row at mid + half (d / k) g, g on the public grid; the rest at mid
        from privgraph.mechanisms.features.piecewise import pm_grid

        k = mech.sampled_dimensions(d)
        grid = pm_grid(mech.dimension_epsilon(d))
        rows, cols = np.nonzero(~centre)
        v = x[rows, cols].astype(np.float64)
        cell = ((v - mid[cols]) / half[cols] / (d / k)) / grid.step + (grid.cells - 1) / 2.0
        # the float32 rounding of a stored value, in cells
        slack = np.spacing(np.abs(x[rows, cols])).astype(np.float64) / half[cols] / (d / k) / grid.step
        off = np.abs(cell - np.rint(cell)) > slack + 1e-9
        inside = (np.rint(cell) >= 0) & (np.rint(cell) < grid.cells)
        out = [] if not off.any() and inside.all() else [f"features: {int(off.sum() + (~inside).sum())} entries off Piecewise's public grid"]
        return out + ([] if np.all((~centre).sum(axis=1) == k) else [f"features: rows without exactly k = {k} reported entries"])
    return [f"features: no documented form for {name!r} in the audit (add it to tests/release_checks.py)"]


def _edge_form(graph_in: GraphData, out: GraphData) -> list[str]:
    """Sampled edges: the public ones as they are; the released ones between nodes of V_pri,
    none of them a public edge (u < v, sorted and distinct: the canonical check)."""
    problems = []
    if not np.array_equal(_sorted(out.edges_public), _sorted(graph_in.edges_public)):
        problems.append("edges: the public edges are not released as they are")
    e = out.edges_private
    if e.size and not np.isin(e, graph_in.private_nodes()).all():
        problems.append("edges: a released edge has an end outside V_pri")
    n = np.int64(out.num_nodes)
    if e.size and np.isin(e[0] * n + e[1], out.edges_public[0] * n + out.edges_public[1]).any():
        problems.append("edges: a released edge repeats a public one")
    return problems


def _label_form(params: dict[str, Any], graph_in: GraphData, out: GraphData) -> list[str]:
    """Label RR: the selected rows (the mask splits' labelled nodes) in [0, C); the others as they are."""
    selected = np.ones(graph_in.num_nodes, bool)
    if params.get("mask"):
        selected = np.any([getattr(graph_in, m) for m in params["mask"]], axis=0)
    selected &= graph_in.y >= 0
    y = out.y
    problems = [] if np.array_equal(y[~selected], graph_in.y[~selected]) else ["labels: rows label RR does not select moved"]
    if not np.all((y[selected] >= 0) & (y[selected] < params["num_classes"])):
        problems.append(f"labels: a randomized label outside [0, {params['num_classes']})")
    return problems


def _public_scopes(graph_in: GraphData, out: GraphData, cfg: Any) -> list[str]:
    """What the pipeline privatizes nothing of is stored as the input has it."""
    problems = []
    if cfg.features is None and graph_in.x is not None and out.x is not None \
            and not np.array_equal(out.x, graph_in.x.astype(np.float32)):
        problems.append("features: stored features differ from the (public) input")
    if cfg.labels is None and graph_in.y is not None and not np.array_equal(out.y, graph_in.y):
        problems.append("labels: stored labels differ from the (public) input")
    if cfg.edges is None and not (
            np.array_equal(_sorted(out.edges_public), _sorted(graph_in.edges_public)) and out.edges_private.size == 0):
        problems.append("edges: stored edges differ from the (public) input")
    return problems


def _aggregates(graph_in: GraphData, out: GraphData, mech: Any, seed: Any) -> list[str]:
    """Statistic plus noise: hop 0 recomputed from the stored release (post-processing, as the
    flow computes it), each later hop the exact statistic over the INPUT's edges plus the noise
    drawn from the stage's seed by the audited sampler."""
    from privgraph.mechanisms.gaussian_noise import discrete_gaussian
    from privgraph.mechanisms.noise import discrete_laplace
    from privgraph.seeding import noise_generator, stage_seed
    from privgraph.evaluate.training import encode_features, public_classes

    no_edges = np.zeros((2, 0), np.int64)
    view = out.replace(edges_public=no_edges, edges_private=no_edges, aggregates=None)
    rows = graph_in.private_nodes()
    rng = noise_generator(stage_seed(seed, "edges"))
    stored = out.aggregates.astype(np.float64)
    if mech.name == "class_counts":
        hop0 = public_classes(view, seed=stage_seed(seed, "edges.encoder"), epochs=mech.encoder_epochs, device="cpu")
        label, classes = hop0.argmax(axis=1), hop0.shape[1]
        counts = np.zeros((graph_in.num_nodes, classes))
        for a, b in (graph_in.edges_private, graph_in.edges_private[::-1]):
            np.add.at(counts, (a, label[b]), 1.0)
        counts[rows] += discrete_laplace(rng, mech.epsilon / 2, rows.size * classes).reshape(rows.size, classes)
        expected = np.stack([hop0, counts])
    elif mech.name == "gap" and mech.weights == "sum":
        def unit(h: np.ndarray) -> np.ndarray:
            norm = np.sqrt((h * h).sum(axis=1, keepdims=True))
            return h / np.where(norm > 0, norm, 1.0)

        def summed(h: np.ndarray, e: np.ndarray) -> np.ndarray:
            agg = np.zeros_like(h)
            np.add.at(agg, e[1], h[e[0]])
            np.add.at(agg, e[0], h[e[1]])
            return agg

        h = unit(encode_features(view, seed=stage_seed(seed, "edges.encoder"), dim=mech.encoder_dim,
                                 epochs=mech.encoder_epochs, device="cpu").astype(np.float64))
        hops, g = [h], mech.grid_exponent
        for _ in range(mech.hops):
            if mech.level == "node":
                priv = summed(h, graph_in.edges_private)
                norm = np.sqrt((priv * priv).sum(axis=1, keepdims=True))
                agg = summed(h, graph_in.edges_public) + priv * np.minimum(1.0, mech.row_clip / np.where(norm > 0, norm, 1.0))
            else:
                agg = summed(h, graph_in.edges("all"))
            if rows.size:
                k = np.rint(np.ldexp(agg[rows], g)).astype(np.int64)
                z = discrete_gaussian(rng, math.ldexp(mech.sigma, g), k.size).reshape(k.shape)
                agg[rows] = np.ldexp((k + z).astype(np.float64), -g)
            h = unit(agg)
            hops.append(h)
        expected = np.stack(hops)
    else:
        return [f"edges: no statistic-plus-noise recomputation for {mech.name!r} in the audit"]
    if stored.shape != expected.shape:
        return [f"edges: aggregates of shape {list(stored.shape)}, the mechanism outputs {list(expected.shape)}"]
    tol = 0.0 if mech.name == "class_counts" else 1e-6  # GAP: float64 sums in another order, stored as float32
    bad = np.abs(stored - expected.astype(np.float32).astype(np.float64)) > tol
    return [f"edges: {int(bad.sum())} cells of aggregates.npy are not the statistic plus the seed's noise"] if bad.any() else []


def release_violations(graph_in: GraphData, objects: dict[str, bytes], cfg: Any, seed: int) -> list[str]:
    """Each scope of one run's stored version against its input ``graph_in`` (what the flow
    privatized; ``x`` may be None for an image graph, whose features the flow computes), the
    pipeline's configuration ``cfg`` (a PipelineConfig: its mechanisms and public parameters) and
    the run's ``seed`` (see the module)."""
    from privgraph.mechanisms import build_mechanism
    from privgraph.seeding import as_seed_sequence, stage_seed

    out = stored_graph(objects)
    problems = _public_scopes(graph_in, out, cfg)
    privatize = stage_seed(as_seed_sequence(seed), "privatize")
    if cfg.features is not None:
        problems += _feature_form(cfg.features.mechanism, cfg.features.params(), out.x)
    if cfg.labels is not None:
        problems += _label_form(cfg.labels.params(), graph_in, out)
    if cfg.edges is not None:
        mech = build_mechanism(cfg.edges.mechanism, cfg.edges.params())
        if mech.releases_aggregates:
            problems += _aggregates(graph_in, out, mech, privatize)
        else:
            problems += _edge_form(graph_in, out)
    return problems
