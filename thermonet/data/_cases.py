"""New cases for a trained model: a data file (or a data set name) read the way the model's
own training set was, so that its predictions can be made on them.

Regression: a CSV, NPZ or HDF5 file (:mod:`thermonet.data._user`) with the training set's
input columns (and, if present, its output columns), standardised with the training set's
constants. Classification: the embedded sets by name (``D500``, ``mnist-t10k``), an IDX image
file (the labels from the matching ``labels-idx1`` file beside it, if any), or an NPZ holding
``images`` (n, 28, 28) as in MNIST, preprocessed as the package does, or ``x`` (n, n_inputs)
already preprocessed, and optionally ``labels`` (or ``y``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from thermonet.data._datasets import OFFICIAL_TEST_NAME, Dataset, load_dataset, official_test
from thermonet.data._mnist import read_idx
from thermonet.data._preprocess import normalise, preprocess
from thermonet.data._user import FILE_SUFFIXES, read_columns, select
from thermonet.errors import DataError

#: whole arrays of inputs and outputs accepted when the named columns are absent (the HDF5
#: default names, and x/y)
WHOLE_ARRAYS = (("inputs", "targets"), ("x", "y"))


def column_names(like: Dataset) -> tuple[list[str], list[str]]:
    """The input and output column names of a regression training set (a built-in set such
    as the robot arm names none: inputs x1, x2, ..., outputs y1, y2, ...)."""
    prov = like.provenance
    ins = list(prov.get("inputs") or [f"x{j + 1}" for j in range(like.x.shape[1])])
    outs = list(prov.get("outputs") or [f"y{j + 1}" for j in range(like.y.shape[1])])
    return ins, outs


def _has(cols: dict[str, np.ndarray], names: Sequence[str]) -> bool:
    for name in names:
        base, _, rest = name.partition("[")
        if name not in cols and not (rest.endswith("]") and base in cols):
            return False
    return True


def _regression(path: pathlib.Path, like: Dataset) -> tuple[Dataset, bool]:
    cols = read_columns(path)
    ins, outs = column_names(like)
    if not _has(cols, ins):
        for a, b in WHOLE_ARRAYS:
            if a in cols and cols[a].ndim == 2 and cols[a].shape[1] == like.x.shape[1]:
                ins, outs = [a], [b]
                break
        else:
            raise DataError(f"data file {path} lacks the run's input columns {ins}; it has "
                            f"{sorted(cols)}; expected a file with the columns the run was "
                            "trained on (the outputs are optional)")
    x = select(cols, ins, "inputs", path)
    has_y = _has(cols, outs)
    y = select(cols, outs, "outputs", path) if has_y else np.full((len(x), like.y.shape[1]),
                                                                   np.nan)
    if x.shape[1] != like.x.shape[1] or y.shape[1] != like.y.shape[1]:
        raise DataError(f"data file {path}: inputs {x.shape[1]} and outputs {y.shape[1]} "
                        f"columns; the run's model takes {like.x.shape[1]} and gives "
                        f"{like.y.shape[1]}; expected the run's columns {ins} -> {outs}")
    st = like.provenance.get("standardisation")
    prov: dict[str, Any] = {"source": "file", "path": str(path.resolve()), "role": "predict",
                            "inputs": ins, "outputs": outs}
    if st:
        x = (x - np.asarray(st["x_mean"])) / np.asarray(st["x_std"])
        y = (y - np.asarray(st["y_mean"])) / np.asarray(st["y_std"])
        prov["standardisation"] = dict(st)
    return Dataset(path.stem, x, y, np.arange(len(x)), prov), has_y


def _images_to_x(path: pathlib.Path, images: np.ndarray) -> np.ndarray:
    if images.ndim == 3 and images.shape[1:] == (28, 28):
        return preprocess(np.asarray(images, dtype=np.uint8))
    if images.ndim == 3 and images.shape[1:] == (16, 16):
        return normalise(np.asarray(images, dtype=np.uint8))
    raise DataError(f"data file {path}: images of shape {images.shape}; expected (n, 28, 28) "
                    "MNIST-style images of 0..255, or an array x of preprocessed inputs")


def _npz_images(path: pathlib.Path) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            raw = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"cannot read {path} as NPZ: {err}; expected a file written by "
                        "numpy.savez") from None
    labels = raw.get("labels", raw.get("y"))
    if "images" in raw:
        x = _images_to_x(path, raw["images"])
    elif "x" in raw and raw["x"].ndim == 2:
        x = np.asarray(raw["x"], dtype=np.float64)
    else:
        raise DataError(f"data file {path} holds {sorted(raw)}; the run is a classifier of "
                        "images: expected an array 'images' (n, 28, 28) or 'x' (n, n_inputs), "
                        "and optionally 'labels'")
    return x, labels


def _idx_images(path: pathlib.Path) -> tuple[np.ndarray, np.ndarray | None]:
    images = read_idx(path)
    x = _images_to_x(path, images)
    name = path.name.replace("images-idx3", "labels-idx1").replace("images.idx3",
                                                                     "labels.idx1")
    twin = path.with_name(name)
    labels = read_idx(twin) if name != path.name and twin.is_file() else None
    return x, labels


def _classification(source: str, path: pathlib.Path, like: Dataset) -> tuple[Dataset, bool]:
    if not path.exists():
        if source in (OFFICIAL_TEST_NAME, "official"):
            return official_test(), True
        return load_dataset(source), True
    suffix = path.suffix.lower()
    if suffix in FILE_SUFFIXES and suffix != ".npz":
        raise DataError(f"data file {path} is a table of columns, for a regression run; this "
                        "run is a classifier of images: expected IDX images, an NPZ of "
                        "'images' and 'labels', or a data set name such as mnist-t10k")
    x, labels = _npz_images(path) if suffix == ".npz" else _idx_images(path)
    if labels is not None and len(labels) != len(x):
        raise DataError(f"data file {path}: {len(x)} images but {len(labels)} labels; expected "
                        "one label per image")
    has_y = labels is not None
    y = np.asarray(labels, dtype=np.int64) if has_y else np.zeros(len(x), np.int64)
    prov = {"source": "file", "path": str(path.resolve()), "role": "predict"}
    return Dataset(path.stem, x, y, np.arange(len(x)), prov), has_y


def read_cases(source: str | pathlib.Path, like: Dataset) -> tuple[Dataset, bool]:
    """The cases in ``source`` prepared as ``like`` (the model's training set) was.

    Returns the Dataset and whether it holds targets (labels or output columns); without
    them ``y`` is a placeholder (NaN for regression, 0 for classification). Every problem is
    a one-line :class:`~thermonet.errors.DataError`: a missing file or column, a file for
    the other kind of model, inputs of another width.
    """
    path = pathlib.Path(source)
    if like.task == "regression":
        if not path.is_file():
            raise DataError(f"data file {path} does not exist; expected a CSV, NPZ or HDF5 "
                            "file with the run's input columns")
        if path.suffix.lower() not in FILE_SUFFIXES or (path.suffix.lower() == ".npz" and (
                _looks_like_images(path))):
            raise DataError(f"data file {path} holds images, for a classifier; this run is a "
                            "regression: expected a CSV, NPZ or HDF5 file with the run's "
                            "input columns")
        return _regression(path, like)
    ds, has_y = _classification(str(source), path, like)
    if ds.x.shape[1] != like.x.shape[1]:
        raise DataError(f"{source}: inputs of width {ds.x.shape[1]}; the run's model takes "
                        f"{like.x.shape[1]}; expected data of the kind it was trained on")
    return ds, has_y


def _looks_like_images(path: pathlib.Path) -> bool:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return "images" in npz.files
    except (OSError, ValueError, EOFError):
        return False


__all__ = ["column_names", "read_cases"]
