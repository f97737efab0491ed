"""beta (Eq. 5): masking the sensitive inputs, aggregated over rows."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.scoring import mask_inputs, masking_sensitivity


def test_identity_zero_mask_hand_values():
    x = np.array([[0.2, 0.5, 1.0, 0.3], [0.6, 0.1, 0.0, 0.9]], dtype=np.float32)
    beta = masking_sensitivity(x, [0, 3])
    # |z - zhat| = x on the sensitive columns, 0 elsewhere; mean over rows: [0.4, 0, 0, 0.6]
    np.testing.assert_allclose(beta, [0.4, 0.0, 0.0, 0.6], rtol=1e-6)
    assert beta[1] == 0.0 and beta[2] == 0.0  # non-sensitive columns: exactly zero


def test_beta_zero_on_non_sensitive_columns_random():
    rng = np.random.default_rng(0)
    x = rng.random((50, 8))
    cols = [1, 4, 6]
    beta = masking_sensitivity(x, cols)
    assert beta.sum() == pytest.approx(1.0)
    assert np.all(beta >= 0)
    others = np.setdiff1d(np.arange(8), cols)
    assert np.all(beta[others] == 0.0)
    assert np.all(beta[cols] > 0)


def test_mean_and_constant_mask_values():
    x = np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    beta = masking_sensitivity(x, [0, 1], mask_value="mean")  # mean 0.5 -> every |dev| = 0.5
    np.testing.assert_allclose(beta, [0.5, 0.5])
    xhat = mask_inputs(x, [1], mask_value=0.25)
    np.testing.assert_array_equal(xhat[:, 0], x[:, 0])
    np.testing.assert_array_equal(xhat[:, 1], 0.25)


def test_embed_hook_with_per_row_masks():
    """Image style: inputs [n, 2, 2], per-row boolean masks, an embedding [n, 2, 2] -> [n, 3]."""
    rng = np.random.default_rng(1)
    x = rng.random((5, 2, 2))
    masks = np.zeros((5, 2, 2), bool)
    masks[:, 0, 0] = True
    masks[2, 1, 1] = True
    W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])

    def embed(a):
        return a.reshape(len(a), 4) @ W

    beta = masking_sensitivity(x, masks, embed=embed)
    diff = np.where(masks, x, 0.0).reshape(5, 4) @ W
    expect = np.abs(diff).mean(0)
    np.testing.assert_allclose(beta, expect / expect.sum(), rtol=1e-12)
    assert beta.shape == (3,)


def test_validation():
    x = np.random.default_rng(2).random((4, 3))
    with pytest.raises(ValueError, match="non-empty"):
        masking_sensitivity(x, [])
    with pytest.raises(ValueError, match="out of range"):
        masking_sensitivity(x, [3])
    with pytest.raises(ValueError, match="duplicate"):
        masking_sensitivity(x, [1, 1])
    with pytest.raises(ValueError, match="mask_value"):
        masking_sensitivity(x, [1], mask_value="median")
    with pytest.raises(TypeError, match="mask_value"):
        masking_sensitivity(x, [1], mask_value=True)
    with pytest.raises(ValueError, match="finite"):
        masking_sensitivity(np.full((2, 2), np.nan), [0])
    with pytest.raises(ValueError, match="selects no input"):
        masking_sensitivity(x, np.zeros(3, bool))
    with pytest.raises(ValueError, match="0/0"):
        masking_sensitivity(np.zeros((3, 3)), [0, 2])  # the sensitive columns already equal the mask
    with pytest.raises(ValueError, match=r"\[n, d\]"):
        masking_sensitivity(x, [0], embed=lambda a: a[:, 0])
