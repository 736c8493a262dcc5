"""Fold assignment is a pure function of the global row index or group id."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamridge.errors import FoldError, ParameterError
from streamridge.folds.schemes import FoldScheme, make_scheme


@pytest.mark.parametrize("K", [2, 5, 23])
def test_hash_folds_independent_of_chunking_and_balanced(K):
    s = FoldScheme("hash", K, seed=11)
    whole = s.assign(0, 1000)
    cuts = [0, 1, 8, 9, 250, 777, 1000]
    pieces = np.concatenate([s.assign(a, b - a) for a, b in itertools.pairwise(cuts)])
    np.testing.assert_array_equal(whole, pieces)
    counts = np.bincount(whole, minlength=K)
    assert counts.max() - counts.min() <= 1
    assert set(s.assign(0, K)) == set(range(K))  # no empty fold once M >= K


def test_seed_changes_assignment():
    a = FoldScheme("hash", 5, seed=0).assign(0, 100)
    b = FoldScheme("hash", 5, seed=1).assign(0, 100)
    assert (a != b).mean() > 0.5


def test_group_folds_share_fold_per_group():
    g = np.array(["a", "b", "a", "c", "b", "d", "e", "f"] * 10)
    f = FoldScheme("group", 3, seed=2).assign(0, len(g), g)
    for v in np.unique(g):
        assert len(set(f[g == v])) == 1
    gi = np.arange(80) // 8
    fi = FoldScheme("group", 3, seed=2).assign(0, 80, gi)
    halves = [FoldScheme("group", 3, seed=2).assign(a, 40, gi[a : a + 40]) for a in (0, 40)]
    np.testing.assert_array_equal(fi, np.concatenate(halves))


def test_leave_one_group_out_and_blocks():
    g = np.repeat([7, 3, 9], 4)
    s = make_scheme("groups", group_values=g)
    np.testing.assert_array_equal(s.assign(0, 12, g), np.repeat([1, 0, 2], 4))
    b = make_scheme("blocks", n_rows=10, n_blocks=3)
    np.testing.assert_array_equal(b.assign(0, 10), [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(b.assign(5, 5), [1, 1, 2, 2, 2])


def test_scheme_roundtrip_and_errors():
    s = make_scheme("groups", group_values=np.array([1, 2, 3]))
    assert FoldScheme.from_dict(s.to_dict()) == s
    with pytest.raises(ParameterError, match="at least 2 folds"):
        FoldScheme("hash", 1)
    with pytest.raises(ParameterError, match="cv must be"):
        make_scheme("bogus")
    with pytest.raises(FoldError, match="not seen"):
        s.assign(0, 2, np.array([1, 5]))
    with pytest.raises(FoldError, match="at least 2 distinct groups"):
        make_scheme("groups", group_values=np.array([4, 4]))
