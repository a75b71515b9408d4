"""The embedded data file: D50, D500, D5000 and the official test set, shipped in the package.

It holds the Pillow-resized **uint8** 16x16 images (so it is small, and the float64 inputs are
recomputed bit-identically by :func:`~thermonet.data.normalise`), the labels, the indices and
the provenance of the build. Rebuild it with::

    python scripts/build_embedded_data.py --mnist-dir DIR
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import pathlib
from typing import Any

import h5py
import numpy as np

from thermonet.data._files import write_h5_replace
from thermonet.data._mnist import MNIST_FILES, N_TEST, PathLike, find_mnist, mnist16
from thermonet.data._preprocess import MEAN, PREPROCESSING, STD, pillow_version
from thermonet.data._subsets import (
    EMBEDDED_SUBSETS,
    PAPER_SUBSETS,
    check_balance,
    read_paper_subset,
)
from thermonet.errors import DataError

logger = logging.getLogger("thermonet.data")

EMBEDDED_PATH = pathlib.Path(__file__).resolve().parent / "embedded" / "mnist16.h5"
EMBEDDED_FORMAT = "thermonet.mnist16"
EMBEDDED_FORMAT_VERSION = 1
BUILD_COMMAND = "python scripts/build_embedded_data.py --mnist-dir DIR"
CREDIT = ("MNIST by Y. LeCun, C. Cortes and C. J. C. Burges (CC BY-SA 3.0); subset indices "
          "from rjnbaldock/nn_sample (MIT licence, (c) 2019 Robert Baldock)")
_ARRAYS = ("train/indices", "train/labels", "train/images16", "test/labels", "test/images16",
           *(f"subsets/{s}" for s in EMBEDDED_SUBSETS))


def _array_sha256(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def build_embedded(mnist_dir: PathLike | None, out_path: PathLike = EMBEDDED_PATH) -> pathlib.Path:
    """Build the embedded file from the four original MNIST files.

    Parameters
    ----------
    mnist_dir : path-like or None
        Directory of the MNIST IDX files (None: ``$THERMONET_MNIST_DIR``, then the default).
    out_path : path-like
        Where to write (default: the package's ``embedded/mnist16.h5``). Written atomically.

    Returns
    -------
    pathlib.Path
        ``out_path``.
    """
    out = pathlib.Path(out_path).expanduser()
    full = mnist16(find_mnist(mnist_dir, verify=False))  # mnist16() verifies the checksums
    subsets = {name: read_paper_subset(name) for name in EMBEDDED_SUBSETS}
    for name, idx in subsets.items():
        check_balance(name, full.train_labels[idx])
    union = np.unique(np.concatenate(list(subsets.values())))
    arrays: dict[str, np.ndarray] = {
        "train/indices": union.astype(np.int32),
        "train/labels": full.train_labels[union],
        "train/images16": full.train16[union],
        "test/labels": np.asarray(full.test_labels),
        "test/images16": np.asarray(full.test16),
        **{f"subsets/{s}": idx.astype(np.int32) for s, idx in subsets.items()},
    }
    attrs: dict[str, Any] = {
        "format": EMBEDDED_FORMAT,
        "format_version": EMBEDDED_FORMAT_VERSION,
        "description": ("Pillow-resized uint8 16x16 MNIST images of the union of the paper's "
                        "training sets " + ", ".join(EMBEDDED_SUBSETS) + " and of the 10,000 "
                        "official test images, with labels and indices"),
        "source_sha256": json.dumps({MNIST_FILES[k].filename: v
                                     for k, v in full.sha256.items()}, sort_keys=True),
        "pillow_version": pillow_version(),
        "numpy_version": np.__version__,
        "h5py_version": h5py.__version__,
        "preprocessing": json.dumps(PREPROCESSING),
        "normalise_mean": MEAN,
        "normalise_std": STD,
        "subset_files": json.dumps({s: PAPER_SUBSETS[s] for s in EMBEDDED_SUBSETS}),
        "build_command": BUILD_COMMAND,
        "credit": CREDIT,
        "content_sha256": json.dumps({k: _array_sha256(a) for k, a in arrays.items()},
                                     sort_keys=True),
    }

    def fill(f: h5py.File) -> None:
        for key, arr in arrays.items():
            chunks = (min(len(arr), 2048), *arr.shape[1:])
            f.create_dataset(key, data=arr, chunks=chunks, compression="gzip",
                             compression_opts=9, shuffle=arr.dtype.itemsize > 1,
                             track_times=False)
        f["train/indices"].attrs["description"] = "0-based MNIST training-set indices, ascending"
        f["test/images16"].attrs["description"] = "the official t10k images, in file order"
        for s in EMBEDDED_SUBSETS:
            f[f"subsets/{s}"].attrs["file"] = PAPER_SUBSETS[s]
            f[f"subsets/{s}"].attrs["description"] = "indices in the paper's file order"
        f.attrs.update(attrs)

    write_h5_replace(out, fill)
    logger.debug("wrote %s (%d bytes)", out, out.stat().st_size)
    return out


def read_embedded(path: PathLike | None = None) -> dict[str, Any]:
    """The embedded file's arrays (read-only, shared) and attributes, checked for integrity."""
    p = pathlib.Path(path) if path is not None else EMBEDDED_PATH
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DataError(f"the embedded data file {p} is missing; the thermonet installation is "
                        f"incomplete: reinstall thermonet, or rebuild the file with "
                        f"`{BUILD_COMMAND}`") from None
    return _read_embedded(str(p.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _read_embedded(path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    fix = f"reinstall thermonet or rebuild it with `{BUILD_COMMAND}`"
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != EMBEDDED_FORMAT:
                raise DataError(f"{path} is not thermonet's embedded data file (format "
                                f"{f.attrs.get('format')!r}, expected {EMBEDDED_FORMAT!r}); {fix}")
            if int(f.attrs["format_version"]) > EMBEDDED_FORMAT_VERSION:
                raise DataError(f"{path} has format version {int(f.attrs['format_version'])}; "
                                f"this thermonet reads up to {EMBEDDED_FORMAT_VERSION}; {fix}")
            arrays = {k: f[k][()] for k in _ARRAYS}
            attrs = {k: (v.item() if isinstance(v, np.generic) else v)
                     for k, v in f.attrs.items()}
    except (OSError, KeyError) as err:
        raise DataError(f"the embedded data file {path} is unreadable or incomplete ({err}); "
                        f"{fix}") from None
    expected = json.loads(attrs["content_sha256"])
    for key, arr in arrays.items():
        if _array_sha256(arr) != expected.get(key):
            raise DataError(f"the embedded data file {path} is corrupt: {key} does not match its "
                            f"recorded SHA-256; {fix}")
        arr.setflags(write=False)
    if arrays["test/images16"].shape != (N_TEST, 16, 16):
        raise DataError(f"{path}: test/images16 has shape {arrays['test/images16'].shape}; {fix}")
    return {"arrays": arrays, "attrs": attrs, "path": path}


def clear_cache() -> None:
    """Forget the in-memory copy of the embedded file."""
    _read_embedded.cache_clear()
