"""Stratified training sets D_n: the paper's own index files and new seeded draws.

A name ``D<n>`` means n images, n/10 per class. The paper's sets (``PAPER_SUBSETS``) always
mean the paper's index files. Any other ``D<n>`` is drawn once from a seed with the original
algorithm and stored in HDF5 under ``<data dir>/subsets/D<n>.h5``; every later use of the name
reads that file back, so the same name always means the same images.
"""

from __future__ import annotations

import datetime
import json
import logging
import pathlib
import re
from typing import Any

import h5py
import numpy as np

from thermonet.data._files import write_h5_exclusive
from thermonet.data._mnist import N_TRAIN, PathLike, data_dir_path
from thermonet.errors import DataError

logger = logging.getLogger("thermonet.data")

#: paper name -> index file (0-based MNIST-train indices, one a line, in the paper's order)
PAPER_SUBSETS: dict[str, str] = {
    "D50": "data5.txt",
    "D500": "data50.txt",
    "D5000": "data500.txt",
    "D1000": "data100.txt",
    "D50000": "data5000.txt",
}
#: the paper subsets shipped (with their images) in the embedded file
EMBEDDED_SUBSETS: tuple[str, ...] = ("D50", "D500", "D5000")

SUBSET_FORMAT = "thermonet.subset"
SUBSET_FORMAT_VERSION = 1
ALGORITHM = ("perm = np.random.default_rng(seed).permutation(60000); walk perm and keep the "
             "first n/10 indices of each class, in permuted order")

_NAME = re.compile(r"^D([0-9]+)$")
_FILE_NAME = re.compile(r"^data([0-9]+)(?:\.txt)?$")
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
PAPER_SUBSET_DIR = _PACKAGE_DIR / "paper_subsets"


def parse_name(name: str) -> tuple[str, int]:
    """Canonical name and size of a training set.

    Accepts ``D<n>`` (n > 0, divisible by 10) and, as an alias, the original code's file names
    ``data<k>`` / ``data<k>.txt`` (k images per class, i.e. ``D<10k>``).
    """
    if not isinstance(name, str):
        raise DataError(f"data set name must be a string like 'D500', got {name!r}")
    m = _NAME.match(name.strip())
    if m is None:
        f = _FILE_NAME.match(name.strip())
        if f is None:
            raise DataError(
                f"unknown data set name {name!r}; expected D<n> with n divisible by 10 "
                f"(the paper's sets: {', '.join(PAPER_SUBSETS)}; any other D<n>, e.g. D200, is "
                f"drawn from a seed) or an original index-file name such as 'data50.txt'")
        n = 10 * int(f.group(1))
    else:
        n = int(m.group(1))
    if n <= 0 or n % 10:
        raise DataError(f"data set {name!r} has n = {n} images; n must be a positive multiple of "
                        f"10 (stratified: n/10 images per class), e.g. D{max(10, n - n % 10)}")
    if n > N_TRAIN:
        raise DataError(f"data set {name!r} asks for {n} images; MNIST has {N_TRAIN} training "
                        f"images (at most 54210 with n/10 per class)")
    return f"D{n}", n


def read_paper_subset(name: str) -> np.ndarray:
    """The paper's indices for ``name`` (a key of ``PAPER_SUBSETS``), in file order.

    Returns
    -------
    ndarray of int64, shape (n,)
        0-based MNIST training-set indices, the first token of each line.
    """
    canonical, n = parse_name(name)
    if canonical not in PAPER_SUBSETS:
        raise DataError(f"{name!r} is not one of the paper's sets ({', '.join(PAPER_SUBSETS)})")
    path = PAPER_SUBSET_DIR / PAPER_SUBSETS[canonical]
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except OSError as err:
        raise DataError(f"cannot read the paper's index file {path}: {err.strerror or err}; "
                        f"the thermonet installation is incomplete: reinstall it") from None
    tokens = [ln.split()[0] for ln in lines if ln.strip()]
    try:
        idx = np.array([int(t) for t in tokens], dtype=np.int64)
    except ValueError as err:
        raise DataError(f"{path.name}: {err}; expected one integer index a line") from None
    if idx.size != n:
        raise DataError(f"{path.name} holds {idx.size} indices; {canonical} needs {n}")
    if idx.min() < 0 or idx.max() >= N_TRAIN or np.unique(idx).size != n:
        raise DataError(f"{path.name}: indices must be distinct and in [0, {N_TRAIN})")
    return idx


def check_balance(name: str, labels: np.ndarray) -> None:
    """Raise unless ``labels`` hold exactly n/10 of each of the ten classes."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=10)
    if counts.size != 10 or np.any(counts != labels.size // 10):
        raise DataError(f"{name} is not stratified: class counts {counts.tolist()}, expected "
                        f"{labels.size // 10} of each class")


def stratified_indices(labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The original ``sampleFromClass`` draw, seeded.

    ``perm = np.random.default_rng(seed).permutation(len(labels))``; walk ``perm`` and keep an
    index while its class has fewer than n/10 kept. Vectorised, same result as the walk.

    Returns
    -------
    ndarray of int64, shape (n,)
        Training-set indices in permuted order (classes interleaved).
    """
    labels = np.asarray(labels)
    if n % 10:
        raise DataError(f"n = {n} is not divisible by 10 (stratified: n/10 per class)")
    per_class = n // 10
    counts = np.bincount(labels, minlength=10)
    if np.any(counts < per_class):
        raise DataError(f"cannot draw {per_class} images per class: MNIST has only "
                        f"{int(counts.min())} of class {int(counts.argmin())}; the largest "
                        f"stratified set is D{10 * int(counts.min())}")
    perm = np.random.default_rng(seed).permutation(labels.size)
    lab_perm = labels[perm]
    keep = np.zeros(labels.size, dtype=bool)
    for c in range(10):
        keep[np.flatnonzero(lab_perm == c)[:per_class]] = True
    return perm[keep].astype(np.int64)


# ---------------------------------------------------------------------------------------------
# stored (generated) subsets

def subsets_dir(data_dir: PathLike | None = None) -> pathlib.Path:
    """Where generated training sets are stored: ``<data dir>/subsets``."""
    return data_dir_path(data_dir) / "subsets"


def subset_path(name: str, data_dir: PathLike | None = None) -> pathlib.Path:
    """The HDF5 file of a generated training set."""
    canonical, _ = parse_name(name)
    return subsets_dir(data_dir) / f"{canonical}.h5"


def read_stored_subset(path: pathlib.Path) -> dict[str, Any]:
    """Read a stored subset file: indices, labels, images16 and its attributes (as a dict)."""
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != SUBSET_FORMAT:
                raise DataError(f"{path} is not a thermonet subset file (format attribute "
                                f"{f.attrs.get('format')!r}, expected {SUBSET_FORMAT!r}); "
                                f"move it away or delete it")
            version = int(f.attrs["format_version"])
            if version > SUBSET_FORMAT_VERSION:
                raise DataError(f"{path} has subset format version {version}; this thermonet "
                                f"reads up to {SUBSET_FORMAT_VERSION}: upgrade thermonet")
            out: dict[str, Any] = {
                "indices": f["indices"][()].astype(np.int64),
                "labels": f["labels"][()],
                "images16": f["images16"][()],
                "name": str(f.attrs["name"]),
                "seed": int(f.attrs["seed"]),
                "n": int(f.attrs["n"]),
                "source_sha256": json.loads(f.attrs["source_sha256"]),
                "pillow_version": str(f.attrs["pillow_version"]),
                "created_utc": str(f.attrs["created_utc"]),
            }
    except (OSError, KeyError, ValueError) as err:
        raise DataError(f"stored subset {path} is unreadable or incomplete ({err}); delete it "
                        f"and it will be drawn again from its seed") from None
    n = out["n"]
    if (out["indices"].shape != (n,) or out["labels"].shape != (n,)
            or out["images16"].shape != (n, 16, 16) or out["name"] != path.stem):
        raise DataError(f"stored subset {path} is inconsistent (name {out['name']!r}, n {n}, "
                        f"shapes {out['indices'].shape}/{out['labels'].shape}/"
                        f"{out['images16'].shape}); delete it and it will be drawn again")
    return out


def store_subset(path: pathlib.Path, name: str, seed: int, indices: np.ndarray,
                 labels: np.ndarray, images16: np.ndarray, source_sha256: dict[str, str],
                 pillow_version: str) -> bool:
    """Store a generated subset (exclusive create). Returns False if the file already existed."""
    from thermonet import __version__
    from thermonet.data._preprocess import PREPROCESSING

    def fill(f: h5py.File) -> None:
        kw: dict[str, Any] = {"compression": "gzip", "compression_opts": 6}
        f.create_dataset("indices", data=np.asarray(indices, dtype=np.int64), **kw)
        f.create_dataset("labels", data=np.asarray(labels, dtype=np.uint8), **kw)
        f.create_dataset("images16", data=np.asarray(images16, dtype=np.uint8), **kw)
        f["indices"].attrs["description"] = "0-based MNIST training-set indices, draw order"
        f["images16"].attrs["description"] = "Pillow-resized uint8 16x16 images (see preprocessing)"
        f.attrs.update({
            "format": SUBSET_FORMAT,
            "format_version": SUBSET_FORMAT_VERSION,
            "name": name,
            "n": len(indices),
            "seed": int(seed),
            "algorithm": ALGORITHM,
            "source_sha256": json.dumps(source_sha256, sort_keys=True),
            "pillow_version": pillow_version,
            "preprocessing": json.dumps(PREPROCESSING),
            "thermonet_version": __version__,
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
        })

    return write_h5_exclusive(path, fill)


def list_stored_subsets(data_dir: PathLike | None = None) -> list[dict[str, Any]]:
    """Name, n, seed, path and creation time of each stored subset (unreadable ones: error)."""
    out: list[dict[str, Any]] = []
    directory = subsets_dir(data_dir)
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("D*.h5"), key=lambda p: (len(p.stem), p.stem)):
        entry: dict[str, Any] = {"name": path.stem, "path": str(path)}
        try:
            with h5py.File(path, "r") as f:
                entry.update(n=int(f.attrs["n"]), seed=int(f.attrs["seed"]),
                             created_utc=str(f.attrs["created_utc"]))
        except (OSError, KeyError) as err:
            entry["error"] = f"unreadable: {err}"
        out.append(entry)
    return out
