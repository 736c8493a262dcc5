"""What each command imports (the CLI's cost is mostly its imports) and ``python -m streamridge``.

Each case runs in a fresh interpreter and lists the heavy packages found in
``sys.modules`` afterwards: a command must not pay for a package it does not use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def _imported(code: str, modules: tuple[str, ...], *, cwd: Path) -> list[str]:
    proc = _run(f"import sys\n{code}\nprint(sorted(m for m in {modules!r} if m in sys.modules))", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout.strip().splitlines()[-1])  # a list of names printed by the child


@pytest.fixture
def npy_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = X @ np.arange(1.0, 5.0) + 0.1 * rng.standard_normal(300)
    d = tmp_path / "data"
    d.mkdir()
    for name, a in (("X", X), ("y", y), ("groups", np.repeat(np.arange(3), 100))):
        np.save(d / f"{name}.npy", a)
    return d


def test_info_reads_the_header_without_scipy(tmp_path: Path) -> None:
    """``info`` needs numpy for the .npz file, not the solvers or the metric pass (scipy)."""
    rng = np.random.default_rng(0)
    from streamridge import StreamRidgeCV
    from streamridge.io.model_file import save_model

    model = tmp_path / "m.npz"
    save_model(StreamRidgeCV(cv=3).fit(rng.standard_normal((60, 3)), rng.standard_normal(60)), model)
    code = f"from streamridge.cli import main\nassert main(['info', {str(model)!r}]) == 0"
    assert _imported(code, ("scipy", "sklearn", "dask"), cwd=tmp_path) == []


def test_fit_of_npy_files_imports_no_cluster_and_no_storage_backends(tmp_path: Path, npy_dir: Path) -> None:
    """A threaded fit of .npy files imports neither distributed (dask resolves scheduler *names* by
    importing it) nor zarr or h5py (the backends of other formats), nor dask at all: the pass reads
    through the readers, and the source's dask views are built only when asked for (0.2 s)."""
    out = tmp_path / "m.npz"
    code = (
        "from streamridge.cli import main\n"
        f"assert main(['fit', '--data', {str(npy_dir)!r}, '--groups', 'groups', '--leave-group-out', "
        f"'--alphas', '0.1', '1', '10', '--out', {str(out)!r}, '--quiet']) == 0"
    )
    assert _imported(code, ("distributed", "zarr", "h5py", "dask"), cwd=tmp_path) == []
    from streamridge import load_model

    assert load_model(str(out)).coef_.shape == (4,)


def test_zarr_and_hdf5_still_open_as_paths_and_objects(tmp_path: Path) -> None:
    """The backends imported on first use: paths, open zarr groups and h5py files, and the writers."""
    import h5py
    import zarr

    from streamridge.sources import open_source, write_hdf5, write_zarr

    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((50, 3)), rng.standard_normal(50)
    z = write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=20)
    h = write_hdf5(tmp_path / "d.h5", X, y, chunk_rows=20)
    for data in (z, h, zarr.open_group(z, mode="r")):
        np.testing.assert_array_equal(open_source(data).X.compute(), X)
    with h5py.File(h, "r") as f:
        np.testing.assert_array_equal(open_source(f).y.compute(), y)


def test_sources_unknown_attribute_is_an_attribute_error() -> None:
    import streamridge.sources as sources

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = sources.nope


def test_importing_main_module_does_not_run_the_cli(tmp_path: Path) -> None:
    proc = _run("import streamridge.__main__", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_python_dash_m_runs_the_cli(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "streamridge", "fit"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("streamridge: error: the following arguments are required")


def test_local_passes_name_no_dask_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threaded pass gives dask its schedulers as callables: resolving a *name* ("sync",
    "threads") makes dask import distributed (0.3-0.6 s) to look for a client first."""
    import dask.array as da
    import dask.base

    from streamridge import StreamRidgeCV

    calls: list[int] = []
    monkeypatch.setattr(dask.base, "_distributed_available", lambda: calls.append(1) or False)
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((600, 4)), rng.standard_normal(600)
    g = np.repeat(np.arange(3), 200)
    dX, dy, dg = (da.from_array(a, chunks=200) for a in (X, y, g))
    fitted = StreamRidgeCV(alphas=[0.1, 1.0], cv="groups").fit(dX, dy, groups=dg)
    assert calls == []
    reference = StreamRidgeCV(alphas=[0.1, 1.0], cv="groups").fit(X, y, groups=g)
    np.testing.assert_allclose(fitted.coef_, reference.coef_, rtol=1e-12)


@pytest.fixture
def zarr_store(tmp_path: Path) -> Path:
    import zarr

    rng = np.random.default_rng(3)
    X = rng.standard_normal((600, 6)).astype(np.float32)
    y = X @ rng.standard_normal(6) + 0.3 * rng.standard_normal(600)
    labels = np.digitize(y, [-1.0, 0.5])  # three unbalanced classes
    store = tmp_path / "d.zarr"
    g = zarr.open_group(str(store), mode="w")
    for name, a in (("X", X), ("y", y), ("c", labels), ("g", np.arange(600) // 100)):
        g.create_array(name, data=a, chunks=(150, *a.shape[1:]))
    return store


FIT_CASES = {
    "regression": [],
    "classifier balanced, scoring": [
        "--y",
        "c",
        "--classify",
        "--balanced",
        "--scoring",
        "balanced_accuracy",
    ],
    "forward selection": ["--select", "forward", "--max-features", "4"],
    "groups, nested, scoring": ["--groups", "g", "--leave-group-out", "--nested", "--scoring", "r2"],
}


@pytest.mark.parametrize("case", sorted(FIT_CASES))
def test_fit_imports_no_scikit_learn_and_writes_the_estimators_model(
    tmp_path: Path, zarr_store: Path, case: str
) -> None:
    """``fit`` runs the scikit-learn-free classes (about 0.65 s of CPU less per command); its model
    file names the public estimator, loads as it, and holds what the estimator's own fit writes."""
    from streamridge import StreamRidgeClassifierCV, StreamRidgeCV, load_model
    from streamridge.io.model_file import read_model

    out = tmp_path / "cli.npz"
    argv = [
        "fit",
        "--data",
        str(zarr_store),
        *FIT_CASES[case],
        "--alphas",
        "0.01",
        "1",
        "100",
        "--out",
        str(out),
        "--quiet",
    ]
    code = f"from streamridge.cli import main\nassert main({argv!r}) == 0"
    # a metric pass (--scoring) streams the dask views; a fit without one imports no dask
    assert _imported(code, ("sklearn",) if "--scoring" in argv else ("sklearn", "dask"), cwd=tmp_path) == []

    # the same fit through the public estimator, saved by save_model
    from streamridge.io.model_file import save_model
    from streamridge.sources import open_source

    classify = "--classify" in argv
    model = load_model(str(out))
    public = StreamRidgeClassifierCV if classify else StreamRidgeCV
    assert type(model) is public
    est = public(**model.get_params(deep=False))
    est.fit(
        open_source(str(zarr_store), y="c" if classify else "y", groups="g" if "--groups" in argv else None)
    )
    ref = tmp_path / "ref.npz"
    save_model(est, ref)
    h_cli, a_cli = read_model(str(out))
    h_ref, a_ref = read_model(str(ref))
    assert h_cli["estimator"] == public.__name__
    assert sorted(a_cli) == sorted(a_ref)
    for name in a_cli:
        np.testing.assert_array_equal(a_cli[name], a_ref[name], err_msg=name)
    assert {k: v for k, v in h_cli.items() if k != "timings"} == {
        k: v for k, v in h_ref.items() if k != "timings"
    }


def test_the_core_classes_have_the_estimators_parameters() -> None:
    """The scikit-learn-free classes take, report and set the same parameters as the public ones;
    scikit-learn's own get_params/set_params serve the public classes."""
    from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
    from streamridge.errors import ParameterError
    from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore

    for public, core in ((StreamRidgeCV, RidgeCVCore), (StreamRidgeClassifierCV, RidgeClassifierCVCore)):
        params = {"alphas": [0.1, 1.0], "cv": "groups", "selection": "forward", "progress": True}
        assert core(**params).get_params() == public(**params).get_params(deep=False)
        assert public.get_params is not core.get_params  # BaseEstimator's comes first in the public MRO
        c = core().set_params(cv=3, n_blocks=7)
        assert (c.cv, c.n_blocks) == (3, 7)
        with pytest.raises(ParameterError, match="invalid parameter 'folds'"):
            core().set_params(folds=3)
        assert core._model_name == public.__name__


@pytest.mark.parametrize("classify", [False, True])
def test_predict_imports_no_scikit_learn_and_writes_the_estimators_predictions(
    tmp_path: Path, zarr_store: Path, classify: bool
) -> None:
    """``predict`` loads the model as the scikit-learn-free class (its X is a source, read through its
    reader: no dask either); the arrays it writes equal the loaded public estimator's ``predict`` /
    ``decision_function``."""
    import zarr

    from streamridge import load_model
    from streamridge.cli import main

    model = tmp_path / "m.npz"
    y = ["--y", "c", "--classify"] if classify else []
    assert main(["fit", "--data", str(zarr_store), *y, "--out", str(model), "--quiet"]) == 0
    preds = tmp_path / "p.zarr"
    argv = ["predict", "--model", str(model), "--data", str(zarr_store), "--out", str(preds), "--quiet"]
    argv += ["--scores"] if classify else []
    code = f"from streamridge.cli import main\nassert main({argv!r}) == 0"
    assert _imported(code, ("sklearn", "dask"), cwd=tmp_path) == []
    est = load_model(str(model))
    X = np.asarray(zarr.open_group(str(zarr_store), mode="r")["X"][:])
    out = zarr.open_group(str(preds), mode="r")
    np.testing.assert_array_equal(np.asarray(out["predictions"][:]), est.predict(X))
    if classify:
        np.testing.assert_allclose(np.asarray(out["scores"][:]), est.decision_function(X), rtol=1e-12)


def test_predict_with_a_stateless_map_imports_no_dask(tmp_path: Path, zarr_store: Path) -> None:
    """A stateless feature map is applied to the rows read through the reader (a stateful one needs the
    series in row order: the dask views); the predictions equal the loaded estimator's."""
    import zarr

    from streamridge import load_model
    from streamridge.cli import main

    (tmp_path / "f.toml").write_text('map = "random_hidden"\nn_units = 12\n')
    model = tmp_path / "m.npz"
    assert (
        main(
            [
                "fit",
                "--data",
                str(zarr_store),
                "--features",
                str(tmp_path / "f.toml"),
                "--out",
                str(model),
                "--quiet",
            ]
        )
        == 0
    )
    preds = tmp_path / "p.zarr"
    argv = ["predict", "--model", str(model), "--data", str(zarr_store), "--out", str(preds), "--quiet"]
    code = f"from streamridge.cli import main\nassert main({argv!r}) == 0"
    assert _imported(code, ("dask",), cwd=tmp_path) == []
    X = np.asarray(zarr.open_group(str(zarr_store), mode="r")["X"][:])
    out = np.asarray(zarr.open_group(str(preds), mode="r")["predictions"][:])
    np.testing.assert_allclose(out, load_model(str(model)).predict(X), rtol=1e-12, atol=1e-12)


def test_report_imports_no_scikit_learn(tmp_path: Path, zarr_store: Path) -> None:
    """``report`` reads the fitted attributes of the model as the scikit-learn-free class."""
    pytest.importorskip("matplotlib")
    from streamridge.cli import main

    model = tmp_path / "m.npz"
    assert (
        main(
            [
                "fit",
                "--data",
                str(zarr_store),
                "--y",
                "c",
                "--classify",
                "--select",
                "forward",
                "--out",
                str(model),
                "--quiet",
            ]
        )
        == 0
    )
    page = tmp_path / "r.html"
    code = f"from streamridge.cli import main\nassert main(['report', {str(model)!r}, '--out', {str(page)!r}]) == 0"
    assert _imported(code, ("sklearn",), cwd=tmp_path) == []
    assert "selection path" in page.read_text().lower()


def test_the_core_classes_fit_in_memory_arrays_as_the_estimators_do() -> None:
    """The core classes also take in-memory arrays (scikit-learn's array checks, imported on use):
    the same model as the public estimators, and the same one-line feature-count error."""
    from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
    from streamridge.errors import InputError
    from streamridge.estimators.core import RidgeClassifierCVCore, RidgeCVCore

    rng = np.random.default_rng(5)
    X = rng.standard_normal((120, 4))
    y = X @ np.arange(1.0, 5.0) + rng.standard_normal(120)
    for public, core, target in (
        (StreamRidgeCV, RidgeCVCore, y),
        (StreamRidgeClassifierCV, RidgeClassifierCVCore, np.digitize(y, [-1, 1])),
    ):
        a, b = core(cv=4).fit(X, target), public(cv=4).fit(X, target)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        np.testing.assert_array_equal(a.predict(X), b.predict(X))
        assert a.n_features_in_ == 4
        with pytest.raises(
            InputError, match=f"X has 3 features, but {public.__name__} is expecting 4 features as input"
        ):
            a.predict(X[:, :3])
