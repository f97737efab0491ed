r"""GAP's aggregation perturbation (PMA) and the follow-up's similarity-weighted aggregation:
hop-wise noisy aggregates of encoded node features, released in place of the private edges.

Sajadmanesh, Shamsabadi, Bellet & Gatica-Perez, "GAP: Differentially Private Graph Neural Networks
with Aggregation Perturbation" (USENIX Security 2023), and paper 001 ("Investigating Differentially
Private GNNs with Weighted Aggregations", Algorithm 2, Lemma 1, Theorem 1). Edge-level privacy,
or node-level privacy of the edges over graphs whose private degree is at most a PUBLIC bound
(``level: node``; see :class:`AggregationPerturbation` for why privgraph refuses a larger degree
instead of sampling edges down to it as GAP's code does).

The encoder (an MLP trained on the RELEASED features and labels, no edge read) is post-processing
and lives in :func:`privgraph.evaluate.training.encode_features`; this module is the part that reads the
private edges.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privgraph.guarantee import epsilon_upper, Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.guarantee.params import check_int
from privgraph.errors import GraphValidationError
from privgraph.mechanisms.edges.shapes import Aggregates
from privgraph.mechanisms.gaussian_noise import gaussian_on_grid, grid_sensitivity
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "AggregationPerturbation",
    "LEVELS",
    "WEIGHTS",
    "clip_rows",
    "node_sensitivity",
    "noise_multiplier",
    "normalize_rows",
    "similarity_weights",
]

#: Aggregation weights: ``"sum"`` is GAP's PMA (every edge weight 1); ``"similarity"`` the
#: follow-up's Algorithm 2 (sigmoid of the cosine similarity of the encoded features);
#: ``"learned"`` its Algorithm 1 (an attention model trained on the private edges with DP
#: gradient descent, :mod:`privgraph.mechanisms.edges.gap_attention`; one hop only).
WEIGHTS = ("sum", "similarity", "learned")
#: Edge-level L2 sensitivity of one hop on an UNDIRECTED graph: one edge {u, v} adds a unit-norm
#: row (times a weight in [0, 1]) to the aggregate of u AND of v. Paper 001's Lemma 1 (and GAP's)
#: state 1, which holds for one directed edge; privgraph's edges are undirected.
HOP_SENSITIVITY = math.sqrt(2.0)
#: ``"edge"``: neighbouring graphs differ in one private edge; ``"node"``: in all private edges of
#: one node, both graphs with private degree at most ``max_degree`` (a public bound).
LEVELS = ("edge", "node")
_MAX_DELTA = 0.1
_MAX_DEGREE = 1_000_000


def clip_rows(x: np.ndarray, bound: float) -> np.ndarray:
    """Rows scaled down to L2 norm at most ``bound`` (the projection onto the ball: 1-Lipschitz,
    direction kept); rows already inside are unchanged."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x * np.minimum(1.0, bound / np.where(norms > 0, norms, 1.0))


def node_sensitivity(max_degree: int, row_clip: float) -> float:
    r"""Node-level L2 sensitivity of one hop, :math:`\sqrt{D + C^2}` (rounded up): removing the
    private edges of node ``v`` moves the row of each of its at most ``D`` private neighbours by
    one weighted unit row (weights in (0, 1]) and its own clipped private sum by at most ``C``
    (both clipped sums lie in the ball of radius ``C`` and the one without ``v``'s edges is 0)."""
    return epsilon_upper(math.sqrt(epsilon_upper(max_degree + epsilon_upper(row_clip * row_clip))))


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64); an all-zero row stays zero (its norm is then <= 1)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def similarity_weights(x_unit: np.ndarray, edges: np.ndarray) -> np.ndarray:
    r"""Paper 001's Algorithm 2 weights, :math:`\mathrm{sigmoid}(\check{x}_u \check{x}_v^{\top})`,
    one per undirected edge (the cosine similarity of unit rows, so each weight lies in
    :math:`[\sigma(-1), \sigma(1)] \subset (0, 1)`, as Lemma 1 needs)."""
    dots = np.einsum("ij,ij->i", x_unit[edges[0]], x_unit[edges[1]])
    return 1.0 / (1.0 + np.exp(-dots))


def noise_multiplier(epsilon: float, delta: float, hops: int, *, prior: tuple[int, float] | None = None) -> tuple[float, float]:
    """``(z, eps_z)``: the smallest noise multiplier ``z`` (std / sensitivity) for which ``hops``
    adaptive Gaussian mechanisms compose to (``epsilon``, ``delta``)-DP by the RDP accountant of
    ``dp-accounting`` (Mironov's RDP of the Gaussian, alpha / (2 z^2) per hop, over its default
    orders, converted at ``delta``), and the epsilon the accountant gives at ``z`` (<= epsilon).
    ``prior = (count, z0)``: ``count`` Gaussian mechanisms at multiplier ``z0`` run first (the
    learned attention's training) and are composed with them.

    Raises:
        ValueError: ``prior`` alone spends ``epsilon`` or more at ``delta``."""
    # lazy: dp_accounting, only where GAP calibrates its noise
    from dp_accounting import ComposedDpEvent, GaussianDpEvent, SelfComposedDpEvent, calibrate_dp_mechanism
    from dp_accounting.rdp import RdpAccountant  # lazy: dp_accounting, as above

    def event(z: float) -> Any:
        hop_events = SelfComposedDpEvent(GaussianDpEvent(z), hops)
        if prior is None:
            return hop_events
        return ComposedDpEvent([SelfComposedDpEvent(GaussianDpEvent(prior[1]), prior[0]), hop_events])

    if prior is not None:
        acc = RdpAccountant()
        acc.compose(SelfComposedDpEvent(GaussianDpEvent(prior[1]), prior[0]))
        spent = float(acc.get_epsilon(delta))
        if spent >= epsilon:
            raise ValueError(
                f"gap: the attention's training ({prior[0] // 2} steps at noise multiplier {prior[1]:g}) alone "
                f"spends epsilon {spent:.3f} at delta {delta:g}, not below epsilon {epsilon:g}: take fewer "
                "attention_steps or a larger attention_noise_multiplier"
            )
    z = float(calibrate_dp_mechanism(RdpAccountant, event, epsilon, delta))
    acc = RdpAccountant()
    acc.compose(event(z))
    eps_z = float(acc.get_epsilon(delta))
    while eps_z > epsilon:  # the calibration's tolerance must never understate the loss
        z = math.nextafter(z, math.inf) * (1 + 1e-9)
        acc = RdpAccountant()
        acc.compose(event(z))
        eps_z = float(acc.get_epsilon(delta))
    return z, eps_z


def _check_positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"gap: {name} must be a finite number > 0, got {value!r}")
    return float(value)


@register_mechanism
class AggregationPerturbation(Aggregates):
    r"""GAP's aggregation perturbation module: ``hops`` noisy aggregations of the encoded features,
    released in place of the private edges.

    With :math:`\check{X}^{(0)}` the row-normalised encoder output (a function of the released
    features and labels only) and :math:`W` the weighted adjacency of ALL edges (weights 1, or
    paper 001's similarity weights), for :math:`k = 1 .. K`:

    .. math::
        X^{(k)} = W \check{X}^{(k-1)}, \qquad
        \tilde{X}^{(k)}_v = X^{(k)}_v + \mathcal{N}_{\mathbb{Z}\gamma}(0, \sigma^2 I)
        \ (v \in V_{pri}), \qquad
        \check{X}^{(k)} = \tilde{X}^{(k)} / \lVert \tilde{X}^{(k)} \rVert_{\text{row}},

    GAP's Algorithm 2 lines 3-4, paper 001's Algorithm 2 lines 4-8. The release is
    :math:`[\check{X}^{(0)}, ..., \check{X}^{(K)}]`.

    Privacy. One private edge :math:`\{u, v\}` moves rows ``u`` and ``v`` of one hop's aggregate
    by at most ``w <= 1`` times a unit row each: L2 sensitivity :math:`\sqrt{2}` (paper 001's
    Lemma 1 states 1, which holds for a single DIRECTED edge; privgraph's edges are undirected).
    The aggregate is rounded to the public grid :math:`\gamma = 2^{-20}` and takes discrete
    Gaussian noise (:func:`~privgraph.mechanisms.gaussian_noise.gaussian_on_grid`; floating-point
    Gaussian noise leaks through its low bits), which adds :math:`\gamma \sqrt{2d}` to the
    sensitivity (:func:`~privgraph.mechanisms.gaussian_noise.grid_sensitivity`). The discrete
    Gaussian has the continuous one's RDP curve :math:`\alpha \Delta^2 / (2 \sigma^2)` (Canonne,
    Kamath & Steinke 2020), each hop's input is the previous hop's release (adaptive composition;
    Theorem 1 of paper 001): with :math:`\sigma = z \Delta`, ``K`` hops are
    :math:`(\alpha, K \alpha / (2 z^2))`-RDP, and :func:`noise_multiplier` picks the smallest ``z``
    for which ``dp-accounting``'s RDP accountant converts this to (``epsilon``, ``delta``)-edge DP.
    Rows of nodes without a private edge depend on private edges only through released hops
    (post-processing) and take no noise; :math:`V_{pri}` is public, as for every privgraph edge
    mechanism.

    Node level (``level="node"``). Neighbouring graphs differ in ALL private edges of one node
    ``v`` (added or removed), and both have at most ``max_degree`` (``D``) private edges at every
    node: ``D`` is a PUBLIC bound, and a graph over it is refused (:meth:`check_input`) before
    anything is released. Each hop then releases

    .. math::
        X^{(k)}_u = \sum_{w \in N_{pub}(u)} c_{uw} \check{X}^{(k-1)}_w
        + \mathrm{clip}_C\Big(\sum_{w \in N_{pri}(u)} c_{uw} \check{X}^{(k-1)}_w\Big),

    the private part of each row projected onto the L2 ball of radius ``C = row_clip``
    (1-Lipschitz, direction kept). Removing ``v``'s private edges moves the row of each of its
    ``<= D`` private neighbours by ``c_{uv} |X_v| <= 1`` and ``v``'s own clipped sum by ``<= C``:
    L2 sensitivity :math:`\sqrt{D + C^2}` (:func:`node_sensitivity`; rounding adds
    :math:`\gamma \sqrt{(D + 1) d}`). GAP's node-level variant (and its reference code) instead
    samples each node's out-edges down to ``D`` and states sensitivity :math:`\sqrt{D}`: that
    sample is NOT stable under node removal (a node whose sample held ``v`` draws another
    neighbour instead, and ``v`` may sit in the samples of arbitrarily many nodes), and the removed
    node's own aggregate, which privgraph publishes, moves by up to ``D``; privgraph therefore
    refuses a graph over the public bound and clips the own-row term. Node level implies
    edge level at the same (``epsilon``, ``delta``) (one edge moves at most :math:`\sqrt{2} \le
    \sqrt{D + C^2}`, as ``C >= 1``), the edges scope's ledger unit. It protects the edges only:
    the node's features and label are the features and labels scopes' (LDP mechanisms there
    protect them per node; the encoder and the classifier read only their releases, so no DP-SGD
    is needed).

    Args:
        epsilon (float): the edge-level (or node-level) budget, in ``[2^-10, 50]``.
        delta (float): the approximate-DP delta, in ``(0, 0.1]`` (default: ``1e-5``; the
            pipeline's ``budget_delta`` caps it).
        hops (int): ``K >= 1`` aggregation steps (default: ``1``, paper 001's setting; GAP
            uses up to 5).
        weights (str): ``"sum"`` (GAP's PMA), ``"similarity"`` (paper 001's Algorithm 2) or
            ``"learned"`` (paper 001's Algorithm 1: attention weights trained with DP gradient
            descent on the private edges; one hop) (default: ``"sum"``).
        encoder_dim (int): the encoder's output width ``d`` (default: ``16``, GAP's).
        encoder_epochs (int): the encoder's training epochs (default: ``100``).
        grid_exponent (int): the release grid :math:`2^{-\text{grid\_exponent}}` (default: ``20``).
        attention_steps (int): ``"learned"`` only: the attention's full-batch DP steps
            (default: ``10``); each is two Gaussian mechanisms.
        attention_noise_multiplier (float): ``"learned"`` only: their noise multiplier
            (default: ``16``); the release's aggregation takes the rest of the budget, and a
            training that alone spends ``epsilon`` is refused.
        attention_clip (float): ``"learned"`` only: the per-edge gradient clip (default: ``1``).
        attention_learning_rate (float): ``"learned"`` only: Adam's step size (default: ``0.05``).
        level (str): ``"edge"`` or ``"node"`` (default: ``"edge"``).
        max_degree (int): ``"node"`` only, required: the public bound ``D`` on every node's
            number of private edges.
        row_clip (float): ``"node"`` only: ``C >= 1``, the L2 bound of a row's private part
            (default: :math:`\sqrt{D}`, which makes the sensitivity :math:`\sqrt{2D}`).

    Shapes:
        - input: encoded features ``[n, d]``, all edges ``[2, m]`` (``u < v``), ``V_pri``
        - output: aggregates ``[K + 1, n, d]`` (float32 in the stored version)
    """

    name: ClassVar[str] = "gap"
    scope: ClassVar[Scope] = Scope.EDGES
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        low=2.0**-10,
        high=MAX_EXACT_EPSILON,
        note=(
            "the Gaussian noise multiplier is calibrated by dp-accounting's RDP accountant; below "
            "2^-10 it exceeds 10^4 and the aggregates are noise; no privgraph budget exceeds 50"
        ),
    )

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float = 1e-5,
        hops: int = 1,
        weights: str = "sum",
        encoder_dim: int = 16,
        encoder_epochs: int = 100,
        grid_exponent: int = 20,
        attention_steps: int = 10,
        attention_noise_multiplier: float = 16.0,
        attention_clip: float = 1.0,
        attention_learning_rate: float = 0.05,
        level: str = "edge",
        max_degree: int | None = None,
        row_clip: float | None = None,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0.0 < float(delta) <= _MAX_DELTA):
            raise ValueError(f"gap: delta must be in (0, {_MAX_DELTA}], got {delta!r}")
        self.delta = float(delta)
        self.hops = check_int(hops, "hops", minimum=1)
        if self.hops > 10:
            raise ValueError(f"gap: hops must be at most 10, got {self.hops}")
        if weights not in WEIGHTS:
            raise ValueError(f"gap: weights must be one of {list(WEIGHTS)}, got {weights!r}")
        self.weights = weights
        self.encoder_dim = check_int(encoder_dim, "encoder_dim", minimum=1)
        self.encoder_epochs = check_int(encoder_epochs, "encoder_epochs", minimum=1)
        self.grid_exponent = check_int(grid_exponent, "grid_exponent", minimum=8)
        if self.grid_exponent > 30:
            raise ValueError(f"gap: grid_exponent must be at most 30, got {self.grid_exponent}")
        self._set_level(level, max_degree, row_clip)
        self.attention_steps = check_int(attention_steps, "attention_steps", minimum=1)
        if self.attention_steps > 10_000:
            raise ValueError(f"gap: attention_steps must be at most 10000, got {self.attention_steps}")
        self.attention_noise_multiplier = _check_positive(attention_noise_multiplier, "attention_noise_multiplier")
        self.attention_clip = _check_positive(attention_clip, "attention_clip")
        self.attention_learning_rate = _check_positive(attention_learning_rate, "attention_learning_rate")
        prior = None
        if self.weights == "learned":
            if self.hops != 1:
                raise ValueError(f"gap: learned attention weights aggregate one hop (paper 001), got hops={self.hops}")
            prior = (2 * self.attention_steps, self.attention_noise_multiplier)
        self.noise_multiplier, self.accountant_epsilon = noise_multiplier(self.epsilon, self.delta, self.hops, prior=prior)
        self.sigma = self.noise_multiplier * self.sensitivity

    def _set_level(self, level: str, max_degree: int | None, row_clip: float | None) -> None:
        """Check the privacy level and its bounds; set ``level``, ``max_degree``, ``row_clip`` and the
        aggregation's grid ``sensitivity`` (edge level: one edge; node level: one node's ``max_degree``
        clipped rows). Reads ``weights``, ``encoder_dim`` and ``grid_exponent``, checked before."""
        if level not in LEVELS:
            raise ValueError(f"gap: level must be one of {list(LEVELS)}, got {level!r}")
        self.level = level
        if level == "edge":
            if max_degree is not None or row_clip is not None:
                raise ValueError("gap: max_degree and row_clip apply to level 'node' only")
            self.max_degree = self.row_clip = None
            self.sensitivity = grid_sensitivity(HOP_SENSITIVITY, 2 * self.encoder_dim, self.grid_exponent)
            return
        if max_degree is None:
            raise ValueError("gap: level 'node' needs max_degree, the public bound on every node's private edges")
        self.max_degree = check_int(max_degree, "max_degree", minimum=1)
        if self.max_degree > _MAX_DEGREE:
            raise ValueError(f"gap: max_degree must be at most {_MAX_DEGREE}, got {self.max_degree}")
        clip = math.sqrt(self.max_degree) if row_clip is None else row_clip
        if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not (math.isfinite(clip) and clip >= 1):
            raise ValueError(f"gap: row_clip must be a finite number >= 1, got {row_clip!r}")
        self.row_clip = float(clip)
        if self.weights == "learned":
            raise ValueError("gap: learned attention weights are trained under edge-level privacy; level 'node' "
                             "takes weights 'sum' or 'similarity'")
        self.sensitivity = grid_sensitivity(
            node_sensitivity(self.max_degree, self.row_clip), (self.max_degree + 1) * self.encoder_dim,
            self.grid_exponent,
        )

    @property
    def guarantee(self) -> Guarantee:
        node = self.level == "node"
        return Guarantee(
            kind=GuaranteeKind.NODE_DP if node else GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,  # >= the accountant's epsilon at the calibrated noise
            delta=self.delta,
            scope=Scope.EDGES,
            unit_epsilon=self.epsilon if node else None,
            assumptions=(
                "V_pri (nodes with private edges) is public; rows of other nodes take no noise",
                "the encoder reads only released features and labels (post-processing)",
                *((f"node level: neighbouring graphs differ in all private edges of one node; both have at most "
                   f"max_degree = {self.max_degree} private edges at every node (a public bound; a graph over it "
                   "is refused before anything is released)",
                   "the refusal publishes one bit beside the release: whether every node has at most max_degree "
                   "private edges (a refused run fails, exit 2, publishes nothing else; its message names the "
                   "bound only, the nodes over it go to the owner's private record)",
                   f"each row's private part is clipped to L2 norm row_clip = {self.row_clip:g}: L2 sensitivity "
                   "sqrt(max_degree + row_clip^2) per hop",
                   "node level covers the edges scope; a node's features and label are the features and labels "
                   "scopes' (or declared public)",
                   "implies edge-level (epsilon, delta)-DP: one edge moves at most sqrt 2 <= the node-level "
                   "sensitivity") if node else
                  ("edges are undirected: one edge moves two rows of each hop (L2 sensitivity sqrt 2)",)),
                "discrete Gaussian noise on a 2^-grid_exponent grid; rounding adds "
                + ("2^-grid_exponent sqrt((max_degree + 1) d)" if node else "2^-grid_exponent sqrt(2 d)")
                + " to the sensitivity",
                "RDP of K adaptive Gaussian mechanisms converted to (epsilon, delta) by dp-accounting",
                *(("learned weights: 2 x attention_steps more Gaussian mechanisms (full-batch DP "
                   "gradient descent, per-edge clipping, no subsampling amplification) composed first",)
                  if self.weights == "learned" else ()),
                "public edges are released as they are; private edges are not released",
            ),
        )

    def params(self) -> dict[str, Any]:
        """The constructor's parameters (they rebuild this mechanism)."""
        return {
            "epsilon": self.epsilon, "delta": self.delta, "hops": self.hops, "weights": self.weights,
            "encoder_dim": self.encoder_dim, "encoder_epochs": self.encoder_epochs,
            "grid_exponent": self.grid_exponent,
            **({"attention_steps": self.attention_steps, "attention_noise_multiplier": self.attention_noise_multiplier,
                "attention_clip": self.attention_clip, "attention_learning_rate": self.attention_learning_rate}
               if self.weights == "learned" else {}),
            **({"level": "node", "max_degree": self.max_degree, "row_clip": self.row_clip} if self.level == "node" else {}),
        }

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``|V_pri|`` (the rows that take noise) and the accountant's
        parameters, for the ledger."""
        return {
            **self.params(), "private_nodes": check_int(n_max, "n_max", minimum=0),
            "accountant": {
                "library": "dp-accounting", "accountant": "RdpAccountant (default orders)",
                "event": (f"SelfComposedDpEvent(GaussianDpEvent(noise_multiplier), {self.hops})" if self.weights != "learned"
                          else f"ComposedDpEvent([SelfComposedDpEvent(GaussianDpEvent({self.attention_noise_multiplier}), "
                               f"{2 * self.attention_steps}), GaussianDpEvent(noise_multiplier)])"),
                "noise_multiplier": self.noise_multiplier, "epsilon_at_noise": self.accountant_epsilon,
                "sensitivity": self.sensitivity, "sigma": self.sigma,
            },
        }

    def __repr__(self) -> str:
        node = f", level='node', max_degree={self.max_degree}, row_clip={self.row_clip:g}" if self.level == "node" else ""
        return (f"AggregationPerturbation(epsilon={self.epsilon!r}, delta={self.delta!r}, hops={self.hops}, "
                f"weights={self.weights!r}{node}, sigma={self.sigma:.4g})")

    def check_input(self, edges_private: np.ndarray, num_nodes: int) -> None:
        """Node level: refuse a graph in which some node has more than ``max_degree`` private edges
        (the guarantee holds only under that public bound); edge level: nothing to check.

        What the refusal publishes is one bit, stated in the guarantee: whether every node is
        within the bound. Its message names the bound only; which nodes are over it and their
        degrees (private) are the exception's ``private_detail``, for the owner's private record.

        Raises:
            GraphValidationError: a node over the bound (exit 2)."""
        if self.level != "node":
            return
        e = np.asarray(edges_private, dtype=np.int64).reshape(2, -1)
        degree = np.bincount(e.ravel(), minlength=num_nodes)
        over = np.flatnonzero(degree > self.max_degree)
        if over.size:
            raise GraphValidationError(
                f"gap: the input has a node with more than max_degree = {self.max_degree} private edges, the "
                "public bound of level 'node' (node-level privacy holds only under it): nothing was privatized; "
                "raise edges.max_degree or remove private edges before the run (which nodes: the owner's "
                "private record)",
                private_detail={"nodes_over_max_degree": over.tolist(), "private_degrees": degree[over].tolist(),
                                "max_degree": self.max_degree},
            )

    def aggregate(
        self, encoded: np.ndarray, edges: np.ndarray, private_nodes: np.ndarray, rng: np.random.Generator,
        *, labels: np.ndarray | None = None, train_mask: np.ndarray | None = None,
        private_edge_mask: np.ndarray | None = None,
    ) -> np.ndarray:
        """The release ``[K + 1, n, d]`` (float64): hop 0 the unit rows of ``encoded``, hop ``k``
        the noisy, row-normalised aggregate of hop ``k - 1`` over ``edges`` (all edges, ``u < v``);
        noise on the rows of ``private_nodes`` (sorted ids of V_pri) only. ``"learned"`` weights
        first train the attention model on the RELEASED ``labels`` of ``train_mask``. Node level
        needs ``private_edge_mask`` (which columns of ``edges`` are private): their part of each
        row is clipped to ``row_clip``, and a node over ``max_degree`` is refused."""
        rng = check_generator(rng)
        x = np.asarray(encoded)
        if x.ndim != 2 or x.shape[1] != self.encoder_dim:
            raise ValueError(f"gap: encoded features must be [n, {self.encoder_dim}], got {list(x.shape)}")
        if not np.isfinite(x).all():
            raise ValueError("gap: encoded features must be finite")
        n = x.shape[0]
        e = np.asarray(edges, dtype=np.int64)
        h = normalize_rows(x)
        rows = np.asarray(private_nodes, dtype=np.int64)
        if self.weights == "learned":
            if labels is None or train_mask is None:
                raise ValueError("gap: learned attention weights train on the released labels of the training nodes")
            self.attention_record = {}
            w = self._learned_weights(h, e, rows, labels, train_mask, rng)  # both directions, [2m]
        else:
            w = similarity_weights(h, e) if self.weights == "similarity" else np.ones(e.shape[1])
            w = np.concatenate([w, w])
        # entry (v, u) of the matrix weighs the edge u -> v (row v aggregates its in-neighbours)
        def adjacency(keep: np.ndarray) -> sp.csr_matrix:
            k2 = np.concatenate([keep, keep])
            dst, src = np.concatenate([e[1], e[0]])[k2], np.concatenate([e[0], e[1]])[k2]
            return sp.coo_matrix((w[k2], (dst, src)), shape=(n, n)).tocsr()

        if self.level == "node":
            if private_edge_mask is None:
                raise ValueError("gap: level 'node' needs private_edge_mask (which edges are private)")
            pmask = np.asarray(private_edge_mask, dtype=bool)
            if pmask.shape != (e.shape[1],):
                raise ValueError(f"gap: private_edge_mask must have one entry per edge ({e.shape[1]}), got {list(pmask.shape)}")
            self.check_input(e[:, pmask], n)
            adj, adj_private = adjacency(~pmask), adjacency(pmask)
        else:
            adj, adj_private = adjacency(np.ones(e.shape[1], dtype=bool)), None
        out = [h]
        for _ in range(self.hops):
            agg = np.asarray(adj @ h, dtype=np.float64)
            if adj_private is not None:
                agg += clip_rows(np.asarray(adj_private @ h, dtype=np.float64), self.row_clip)
            if rows.size:
                agg[rows] = gaussian_on_grid(agg[rows], self.sigma, rng, grid_exponent=self.grid_exponent)
            h = normalize_rows(agg)
            out.append(h)
        return np.stack(out)

    def _learned_weights(
        self, h: np.ndarray, edges: np.ndarray, rows: np.ndarray, labels: np.ndarray, train_mask: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        import torch  # lazy: torch, only for the learned attention

        from privgraph.mechanisms.edges.gap_attention import attention_weights, train_attention  # lazy: torch

        model, record = train_attention(
            h, edges, rows, labels, train_mask, steps=self.attention_steps,
            noise_multiplier=self.attention_noise_multiplier, clip=self.attention_clip,
            learning_rate=self.attention_learning_rate, rng=rng, grid_exponent=self.grid_exponent,
        )
        self.attention_record = record
        return attention_weights(model, torch.as_tensor(h), edges)
