"""Every script in examples/ runs in its small mode (so they never rot) and its results make sense."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str):
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.main(small=True)
    finally:
        sys.path.remove(str(EXAMPLES))


def test_every_example_is_tested():
    scripts = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    assert scripts == set(CHECKS), scripts ^ set(CHECKS)


CHECKS = {
    "esn_narma10": lambda r: (
        r["nrmse"] < 0.6 and abs(r["nrmse"] - r["nrmse_sklearn"]) < 1e-6 and r["gap"] < 1e-6
    ),
    "esn_mackey_glass": lambda r: r["nrmse"] < 0.05,
    "esn_mackey_glass_forecast": lambda r: (
        r["nrmse_1_min"] < 0.01 and r["median_valid_1se"] >= 50 and r["valid_steps"] >= 50
    ),
    "elm_selection": lambda r: (
        r["backward"]["units"] < 30 and r["forward"]["units"] < 30 and r["all"]["units"] == 30
    ),
    "crrr_unbalanced": lambda r: r["CRRR"]["balanced_accuracy"] > r["unweighted"]["balanced_accuracy"] + 0.1,
    "rvfl_multiclass": lambda r: r["RVFL"] > 0.9 and r["ELM"] > 0.9,
    "nystroem_basis_removal": lambda r: r["kept"] < 30 and r["mse"] < 3.0,
    "distance_features": lambda r: r["mse"] < r["mse_linear"],
    "partial_fit_stream": lambda r: r["gap"] < 1e-6 and r["nrmse"] < 0.7,
    "cluster_job": lambda r: r["same"] == 1.0,
    "encoding_banded": lambda r: r["r2"] > 0.2 and r["agree"] > 0.8 and r["sum_gap"] < 1e-10,
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_small_mode(name, capsys):
    result = run_example(name)
    out = capsys.readouterr().out
    assert out.strip(), "an example prints its results"
    assert CHECKS[name](result), result
