"""Template: a batch job on a dask cluster, with a feature map, a checkpoint and a saved model.

Copy and edit: point DATA at your zarr/HDF5 store (local, shared or object storage), SCHEDULER at
your cluster (``"tcp://scheduler:8786"``, a dask-jobqueue cluster's ``client``, or ``"local:N"``),
and the map at your model.  Rerunning the same job after a crash resumes from the checkpoint.

Run: ``python examples/cluster_job.py`` (``--small`` for a quick check on threads).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np

import streamridge as sr
from streamridge.features import RandomHidden
from streamridge.io.model_file import save_model
from streamridge.sources import write_zarr


def main(small: bool = False) -> dict[str, float]:
    work = tempfile.mkdtemp(prefix="streamridge-job-")
    rng = np.random.default_rng(0)
    M = 20000 if small else 400000
    X = rng.standard_normal((M, 4)).astype(np.float32)
    y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * rng.standard_normal(M)
    DATA = write_zarr(os.path.join(work, "data.zarr"), X, y, chunk_rows=M // 20)  # stands in for your store
    SCHEDULER = "threads" if small else "local:2"
    model = sr.StreamRidgeCV(
        cv=10,
        features=RandomHidden(200, seed=0),
        feature_prefixes=[25, 50, 100, 200],
        scheduler=SCHEDULER,
        checkpoint=os.path.join(work, "ckpt"),
    ).fit(DATA)
    save_model(model, os.path.join(work, "model.npz"))
    back = sr.load_model(os.path.join(work, "model.npz"))
    same = bool(np.array_equal(back.predict(X[:1000]), model.predict(X[:1000])))
    print(
        f"{M} rows on {SCHEDULER}: pass {model.timings_['pass_s']:.1f} s ({model.timings_['rows_per_s']:,.0f} rows/s); "
        f"{model.n_features_selected_} units, lambda {model.alpha_:.3g}"
    )
    print(
        f"model file {os.path.join(work, 'model.npz')} (map stored, no pickle); reloaded predictions identical: {same}"
    )
    if small:
        shutil.rmtree(work)
    return {"rows_per_s": float(model.timings_["rows_per_s"]), "same": float(same)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    main(ap.parse_args().small)
