r"""The MCMC over dendrograms of EdgeRR (paper 002, Alg. 2, Eq. 12-14) and privHRG.

Every step proposes the Fig. 5 move at a uniformly chosen non-root internal node and one of its
two alternative configurations (a symmetric proposal), and accepts with

.. math::
    \min\left(1, \exp\left(a_{pub}\, \Delta \log\mathcal{L}_{pub}
    + a_{pri}\, \Delta \log\mathcal{L}_{pri}\right)\right).

- public step (Eq. 12): :math:`a_{pub} = 1, a_{pri} = 0` (Metropolis on the public likelihood),
- private step (Eq. 14 with the exponential mechanism's factor 2):
  :math:`a_{pub} = 0, a_{pri} = \varepsilon_{e1} / (2 \Delta_e)`,
- joint step: :math:`a_{pub} = 1, a_{pri} = \varepsilon_{e1} / (2 \Delta_e)`; its stationary law
  :math:`\propto \exp(\log\mathcal{L}_{pub}(D) + \varepsilon_{e1} \log\mathcal{L}_{pri}(D) / (2\Delta_e))`
  is an exponential mechanism whose base measure depends on public data only.

:math:`\Delta_e` is Lemma 4 in Appendix B's form (:func:`private_sensitivity`). The exponential
mechanism's guarantee holds for the chain's STATIONARY law only; the step counts are fixed in
advance (never a data-dependent stopping rule) and recorded. All randomness comes from the
``numpy.random.Generator`` passed in: the proposals and uniforms are drawn from it in chunks and
handed to the jitted loop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privgraph.guarantee import epsilon_upper
from privgraph.mechanisms.base import MIN_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.guarantee.params import check_int
from privgraph.mechanisms.hrg.dendrogram import Dendrogram

__all__ = [
    "EXPONENT_RANGE",
    "MAX_EXPONENT_EPSILON",
    "private_sensitivity",
    "exponent",
    "Phase",
    "MCMCResult",
    "run_mcmc",
    "convergence_stats",
]

# Steps handed to one call of the jitted loop (the draws for a chunk take ~1 MiB).
CHUNK = 1 << 16
# Relative safety margin on the sensitivity (covers the float error of the logarithms).
_MARGIN = 1e-12
# Default number of trace points when the trace interval is automatic.
TRACE_POINTS = 1000

#: The largest MCMC budget eps_e1 privgraph accepts. A step accepts when ``log(u) < x`` with ``u``
#: one numpy 53-bit uniform, so an acceptance probability ``e^x`` is realised to an absolute
#: 2^-53; one private edge moves the exponent ``x = a_pri dL_pri`` of any move by at most eps_e1
#: (``|d dL_pri| <= 2 Delta_e``, ``a_pri = eps_e1 / (2 Delta_e)``), so the ratio of two neighbouring
#: inputs' acceptance probabilities of one move, at most ``e^eps_e1``, is realised to a relative
#: ``2^-53 e^eps_e1`` for every move accepted with probability >= ``e^-eps_e1``: <= 4.9e-11 up to
#: 13, below the 6.4e-11 (2^-106 e^50) that the exact Bernoulli sampler meets at its cap of 50.
#: (This bounds the float error of a step, not the distance of the chain's
#: finite-step law from its stationary law: that is :mod:`~privgraph.mechanisms.hrg.convergence`'s.)
MAX_EXPONENT_EPSILON = 13.0

#: The range of eps_e1, the MCMC's exponential-mechanism budget.
EXPONENT_RANGE = EpsilonRange(
    low=MIN_EXACT_EPSILON,
    high=MAX_EXPONENT_EPSILON,
    note=(
        "the MCMC accepts by comparing the log of one 53-bit uniform with a_pri dL_pri, realising "
        "the ratio e^eps_e1 of neighbouring inputs' acceptance probabilities to a relative "
        "2^-53 e^eps_e1 (<= 4.9e-11 up to 13); below 2^-20 float64 rounding is no longer "
        "negligible against eps_e1"
    ),
)


def private_sensitivity(n_private: int) -> float:
    r"""Global sensitivity of :math:`\log\mathcal{L}_{pri}` (paper 002, Lemma 4, Appendix B, Eq. 19).

    .. math::
        \Delta_e = \ln N + (N - 1) \ln\frac{N}{N - 1}, \qquad
        N = N_{max} = \left\lfloor |V_{pri}|^2 / 4 \right\rfloor,

    the largest :math:`\bar L_r \bar R_r` of any internal node (Cauchy's inequality, end of
    Appendix B; privHRG's code uses the same :math:`\lceil n/2 \rceil \lfloor n/2 \rfloor`). One
    private edge changes one :math:`\bar e_r` by one, and
    :math:`|f(e + 1) - f(e)|` with :math:`f(e) = e \ln(e/N) + (N - e)\ln(1 - e/N)` is largest at
    :math:`e = 0` and grows with :math:`N`. Note: :math:`N` is the number of leaf PAIRS under the
    largest split, not the number of leaves; using the leaf count would understate
    :math:`\Delta_e` (e.g. 2.70 instead of 3.14 at 6 leaves).

    Enlarged by a relative margin of 1e-12 (then rounded up), far above the few ulps of error of
    the logarithms, so float error never understates it. ``0`` when :math:`N \le 1` (at most one
    dendrogram).

    Args:
        n_private (int): :math:`|V_{pri}|`, the number of private leaves.
    """
    n = check_int(n_private, "n_private", minimum=0)
    big_n = (n // 2) * ((n + 1) // 2)
    if big_n <= 1:
        return 0.0
    value = math.log(big_n) - (big_n - 1) * math.log1p(-1.0 / big_n)
    return epsilon_upper(value * (1.0 + _MARGIN))


def exponent(eps1: float, n_private: int) -> float:
    r"""The private step's coefficient :math:`\varepsilon_{e1} / (2 \Delta_e)`, rounded down.

    ``0`` when :math:`\Delta_e = 0` (fewer than 3 private leaves: no move changes the private
    likelihood, so the private steps need no budget).
    """
    delta = private_sensitivity(n_private)
    if delta == 0.0:
        return 0.0
    return float(np.nextafter(eps1 / (2.0 * delta), 0.0))


@dataclasses.dataclass(frozen=True)
class Phase:
    """A block of MCMC steps with one acceptance rule (see the module docstring).

    Attributes:
        kind: ``"public"``, ``"private"`` or ``"joint"`` (a label for the trace).
        steps: number of proposals.
        a_pub: coefficient of the public log-likelihood change.
        a_pri: coefficient of the private log-likelihood change.
    """

    kind: str
    steps: int
    a_pub: float
    a_pri: float

    def __post_init__(self) -> None:
        check_int(self.steps, "steps", minimum=0)
        for name in ("a_pub", "a_pri"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"Phase.{name} must be a finite number >= 0, got {v!r}")


@dataclasses.dataclass
class MCMCResult:
    """What a run of :func:`run_mcmc` did, as data.

    The trace holds the chain's log-likelihoods every ``trace_every`` steps. It is derived from
    the PRIVATE edges and is NOT covered by any privacy guarantee: keep it in the private run
    record, never in a published artifact.
    """

    steps: dict[str, int]
    accepted: dict[str, int]
    trace_every: int
    trace_step: np.ndarray
    trace_phase: np.ndarray
    trace_public: np.ndarray
    trace_private: np.ndarray
    phase_kinds: tuple[str, ...]
    final_log_likelihood: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary with the trace and :func:`convergence_stats` of both series."""
        return {
            "steps": dict(self.steps),
            "accepted": dict(self.accepted),
            "acceptance_rate": {
                k: (self.accepted[k] / self.steps[k] if self.steps[k] else None) for k in self.steps
            },
            "trace_every": int(self.trace_every),
            "trace": {
                "step": self.trace_step.tolist(),
                "phase": [self.phase_kinds[i] for i in self.trace_phase.tolist()],
                "log_likelihood_public": self.trace_public.tolist(),
                "log_likelihood_private": self.trace_private.tolist(),
            },
            "final_log_likelihood": {
                "public": float(self.final_log_likelihood[0]),
                "private": float(self.final_log_likelihood[1]),
            },
            "convergence": {
                "public": convergence_stats(self.trace_public),
                "private": convergence_stats(self.trace_private),
            },
        }


def run_mcmc(
    dendrogram: Dendrogram,
    phases: Sequence[Phase],
    rng: np.random.Generator,
    *,
    trace_every: int = 0,
) -> MCMCResult:
    """Run ``phases`` in order on ``dendrogram`` (in place); the Alg. 2 loop body.

    Args:
        dendrogram (Dendrogram): the chain's state, moved in place.
        phases (Sequence[Phase]): the schedule, e.g. ``[public, private] * rounds``.
        rng (np.random.Generator): the only source of randomness (proposals, uniforms).
        trace_every (int, optional): record the log-likelihoods every this many steps; ``0`` picks
            about 1000 points over the whole run (default: ``0``).

    Returns:
        MCMCResult: step and acceptance counts per kind, the trace, the final log-likelihoods
        (recomputed from scratch).

    Runtime:
        ``O(steps * E[min(w_A, w_B)])`` (see :mod:`privgraph.mechanisms.hrg.dendrogram`), roughly
        flat in ``n``; memory ``O(n + m)`` plus the trace.
    """
    rng = check_generator(rng)
    if not isinstance(dendrogram, Dendrogram):
        raise TypeError(f"dendrogram must be a Dendrogram, got {type(dendrogram).__name__}")
    phases = list(phases)
    for ph in phases:
        if not isinstance(ph, Phase):
            raise TypeError(f"phases must hold Phase records, got {type(ph).__name__}")
    trace_every = check_int(trace_every, "trace_every", minimum=0)
    total = sum(ph.steps for ph in phases)
    if trace_every == 0:
        trace_every = max(1, total // TRACE_POINTS)
    cap = total // trace_every + 1
    tp = np.zeros(cap, dtype=np.float64)
    tq = np.zeros(cap, dtype=np.float64)
    ts = np.zeros(cap, dtype=np.int64)
    pos = np.zeros(1, dtype=np.int64)
    kinds = tuple(dict.fromkeys(ph.kind for ph in phases))
    tphase = np.zeros(cap, dtype=np.int64)
    steps = {k: 0 for k in kinds}
    accepted = {k: 0 for k in kinds}
    step0 = 0
    for ph in phases:
        steps[ph.kind] += ph.steps
        if dendrogram.n < 3:
            step0 += ph.steps
            continue
        before = int(pos[0])
        accepted[ph.kind] += _run_phase(dendrogram, ph, rng, step0, trace_every, (tp, tq, ts, pos))
        step0 += ph.steps
        tphase[before : int(pos[0])] = kinds.index(ph.kind)
    dendrogram.ll[:] = dendrogram.log_likelihood()  # drop the running sum's float drift
    k = int(pos[0])
    return MCMCResult(
        steps=steps,
        accepted=accepted,
        trace_every=trace_every,
        trace_step=ts[:k].copy(),
        trace_phase=tphase[:k].copy(),
        trace_public=tp[:k].copy(),
        trace_private=tq[:k].copy(),
        phase_kinds=kinds,
        final_log_likelihood=dendrogram.log_likelihood(),
    )


def _run_phase(dendrogram: Dendrogram, ph: Phase, rng: np.random.Generator, step0: int, trace_every: int,
               trace: tuple[np.ndarray, ...]) -> int:
    """The ``ph.steps`` steps of one phase, from global step ``step0``, in chunks of :data:`CHUNK`
    (each chunk's proposals, moves and uniforms drawn at once); returns how many were accepted."""
    n_int = dendrogram.num_internal
    accepted = 0
    done = 0
    while done < ph.steps:
        k = min(CHUNK, ph.steps - done)
        picks = rng.integers(0, n_int - 1, size=k, dtype=np.int64)
        moves = rng.integers(0, 2, size=k, dtype=np.int64)
        log_u = np.log(rng.random(k))
        accepted += dendrogram.run_moves(
            picks, moves, log_u, ph.a_pub, ph.a_pri, step0=step0 + done, trace_every=trace_every, trace=trace,
        )
        done += k
    return accepted


def _batch_mean_var(x: np.ndarray, batches: int = 10) -> tuple[float, float]:
    """Mean and the variance of the mean by batch means (robust to autocorrelation)."""
    b = min(batches, x.size)
    if b < 2:
        return float(x.mean()) if x.size else float("nan"), float("nan")
    parts = np.array_split(x, b)
    means = np.array([p.mean() for p in parts])
    return float(x.mean()), float(means.var(ddof=1) / b)


def convergence_stats(trace: np.ndarray, window: float = 0.1) -> dict[str, Any]:
    """Convergence diagnostics of one log-likelihood trace.

    - ``relative_change``: ``|mean(last window) - mean(previous window)| / |mean(previous)|``
      with windows of ``window`` of the trace each;
    - ``geweke_z``: Geweke's z-score of the first 10 % against the last 50 % of the trace, each
      mean's variance by 10 batch means; ``|z| < 2`` is consistent with stationarity.

    ``None`` where the trace is too short (fewer than 20 points).
    """
    x = np.asarray(trace, dtype=np.float64)
    out: dict[str, Any] = {"points": int(x.size), "relative_change": None, "geweke_z": None}
    if x.size < 20:
        return out
    w = max(1, int(round(window * x.size)))
    last, prev = x[-w:], x[-2 * w : -w]
    denom = abs(prev.mean())
    out["relative_change"] = float(abs(last.mean() - prev.mean()) / denom) if denom > 0 else 0.0
    a = x[: max(2, x.size // 10)]
    b = x[x.size // 2 :]
    ma, va = _batch_mean_var(a)
    mb, vb = _batch_mean_var(b)
    s = va + vb
    if math.isfinite(s) and s > 0:
        out["geweke_z"] = float((ma - mb) / math.sqrt(s))
    elif math.isfinite(s):
        out["geweke_z"] = 0.0 if ma == mb else None
    return out
