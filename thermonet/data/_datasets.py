"""Dataset / DataSplit and the loaders that assemble them from the embedded file or full MNIST."""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.data._embedded import EMBEDDED_PATH, read_embedded
from thermonet.data._mnist import (
    DATA_ENV,
    MNIST_FILES,
    N_TEST,
    N_TRAIN,
    Mnist16,
    MnistNotFoundError,
    PathLike,
    data_dir_path,
    find_mnist,
    mnist16,
    mnist_dir_path,
    uncompressed_sha256,
)
from thermonet.data._preprocess import PREPROCESSING, normalise, pillow_version
from thermonet.data._robot_arm import NAME as ROBOT_ARM
from thermonet.data._robot_arm import read as read_robot_arm
from thermonet.data._subsets import (
    ALGORITHM,
    EMBEDDED_SUBSETS,
    PAPER_SUBSETS,
    check_balance,
    list_stored_subsets,
    parse_name,
    read_paper_subset,
    read_stored_subset,
    store_subset,
    subset_path,
    subsets_dir,
)
from thermonet.errors import DataError

logger = logging.getLogger("thermonet.data")

#: Test-image indices are offset by this: MNIST t10k image j has index TEST_INDEX_OFFSET + j.
TEST_INDEX_OFFSET = N_TRAIN
INDEX_ENCODING = ("0..59999: MNIST training image i (train-images-idx3-ubyte); "
                  "60000..69999: official test image j = index - 60000 (t10k-images-idx3-ubyte)")
TEST_KINDS = ("auto", "complement", "official")
OFFICIAL_TEST_NAME = "mnist-t10k"


@dataclass(frozen=True, eq=False)
class Dataset:
    """A preprocessed data set.

    Attributes
    ----------
    name : str
        ``"D500"`` (training sets), ``"mnist-t10k"`` (official test set) or
        ``"complement(D500)"`` (every MNIST image not in D500).
    x : ndarray of float64, shape (n, 256), C-contiguous
        Preprocessed inputs (Pillow resize to 16x16, /255, (v - 0.1307)/0.3081, row-major).
    y : ndarray of int64, shape (n,)
        Labels 0..9; or, for a regression set (``task == "regression"``), real-valued targets
        of float64, shape (n, n_outputs).
    indices : ndarray of int64, shape (n,)
        Where each image came from: ``i < 60000`` is MNIST training image ``i``; ``60000 + j`` is
        official test image ``j`` (see ``INDEX_ENCODING``).
    provenance : mapping
        JSON-serialisable: source SHA-256s, preprocessing, subset file or seed, and whether the
        data came from the embedded file.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    indices: np.ndarray
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        x = np.ascontiguousarray(self.x, dtype=np.float64)
        if np.issubdtype(np.asarray(self.y).dtype, np.floating):
            # real-valued targets of a regression set, one row per case
            y = np.ascontiguousarray(self.y, dtype=np.float64)
            if y.ndim != 2 or y.shape[0] != x.shape[0]:
                raise DataError(f"Dataset {self.name!r}: x has shape {x.shape}, real-valued "
                                f"targets {y.shape}; expected (n, n_inputs) and (n, n_outputs)")
        else:
            y = np.ascontiguousarray(self.y, dtype=np.int64)
        idx = np.ascontiguousarray(self.indices, dtype=np.int64)
        if x.ndim != 2 or y.shape[:1] != (x.shape[0],) or idx.shape != y.shape[:1]:
            raise DataError(f"Dataset {self.name!r}: x has shape {x.shape}, y {y.shape}, indices "
                            f"{idx.shape}; expected (n, n_inputs), (n,) and (n,)")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "indices", idx)
        object.__setattr__(self, "provenance", dict(self.provenance))

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def task(self) -> str:
        """``"regression"`` (real-valued targets, one row per case) or ``"classification"``
        (integer labels)."""
        return "regression" if np.issubdtype(self.y.dtype, np.floating) else "classification"

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, n={len(self)}, x={self.x.dtype}{self.x.shape}, "
                f"source={self.provenance.get('source')!r})")


@dataclass(frozen=True, eq=False)
class DataSplit:
    """A training set and the test set that goes with it.

    ``test_kind`` is ``"complement"`` (every MNIST image not in ``train``: the 10,000 official
    test images, then the remaining training images in ascending index order) or
    ``"official"`` (the 10,000 official test images only).
    """

    train: Dataset
    test: Dataset
    test_kind: str

    def __post_init__(self) -> None:
        if self.test_kind not in ("complement", "official"):
            raise DataError(f"DataSplit.test_kind is {self.test_kind!r}; expected 'complement' "
                            f"or 'official'")


# ---------------------------------------------------------------------------------------------
# provenance helpers

def _base_provenance(role: str, source: str, source_sha256: Mapping[str, str],
                     pillow: str) -> dict[str, Any]:
    from thermonet import __version__

    return {
        "role": role,
        "source": source,
        "embedded": source == "embedded",
        "source_sha256": dict(source_sha256),
        "preprocessing": dict(PREPROCESSING),
        "pillow_version": pillow,
        "index_encoding": INDEX_ENCODING,
        "thermonet_version": __version__,
    }


def _mnist_sha256() -> dict[str, str]:
    return {spec.filename: spec.sha256 for spec in MNIST_FILES.values()}


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _full_mnist(mnist_dir: PathLike | None, data_dir: PathLike | None, why: str) -> Mnist16:
    try:
        files = find_mnist(mnist_dir, verify=False, data_dir=data_dir)
    except MnistNotFoundError as err:
        raise MnistNotFoundError(f"{why} needs the full MNIST files. {err}") from None
    return mnist16(files)  # verifies the checksums


# ---------------------------------------------------------------------------------------------
# training sets

def _embedded_train(name: str) -> Dataset:
    emb = read_embedded()
    a, attrs = emb["arrays"], emb["attrs"]
    idx = a[f"subsets/{name}"].astype(np.int64)
    rows = np.searchsorted(a["train/indices"], idx)
    images16 = a["train/images16"][rows]
    labels = a["train/labels"][rows]
    check_balance(name, labels)
    prov = _base_provenance("train", "embedded", _json(attrs["source_sha256"]),
                            str(attrs["pillow_version"]))
    prov.update(name=name, subset_file=PAPER_SUBSETS[name], seed=None,
                embedded_file=str(emb["path"]))
    return Dataset(name, normalise(images16), labels, idx, prov)


def _json(s: str) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(s)
    return out


def _paper_train_from_mnist(name: str, mnist_dir: PathLike | None,
                            data_dir: PathLike | None) -> Dataset:
    full = _full_mnist(mnist_dir, data_dir,
                       f"the paper's {name} ({PAPER_SUBSETS[name]}) is not embedded, so it")
    idx = read_paper_subset(name)
    labels = full.train_labels[idx]
    check_balance(name, labels)
    prov = _base_provenance("train", "mnist", _mnist_sha256(), pillow_version())
    prov.update(name=name, subset_file=PAPER_SUBSETS[name], seed=None, mnist_files=full.files)
    return Dataset(name, normalise(full.train16[idx]), labels, idx, prov)


def _stored_train(path: pathlib.Path, name: str, seed: int | None) -> Dataset:
    stored = read_stored_subset(path)
    if seed is None:   # no seed asked for: the set as stored (make-subset --seed chose it)
        seed = int(stored["seed"])
    if stored["seed"] != seed:
        raise DataError(
            f"{name} is already stored in {path}, drawn with seed {stored['seed']}, not seed "
            f"{seed}; use seed {stored['seed']} to get the same images, or delete {path} (or "
            f"set {DATA_ENV} to another directory) to draw {name} again with seed {seed}")
    check_balance(name, stored["labels"])
    prov = _base_provenance("train", "stored-subset", stored["source_sha256"],
                            stored["pillow_version"])
    prov.update(name=name, subset_file=str(path), seed=seed, algorithm=ALGORITHM,
                created_utc=stored["created_utc"])
    return Dataset(name, normalise(stored["images16"]), stored["labels"], stored["indices"], prov)


def _ensure_subset(name: str, n: int, seed: int, mnist_dir: PathLike | None,
                   data_dir: PathLike | None) -> tuple[pathlib.Path, bool]:
    path = subset_path(name, data_dir)
    if path.exists():
        return path, False
    full = _full_mnist(mnist_dir, data_dir,
                       f"{name} is not one of the embedded sets ({', '.join(EMBEDDED_SUBSETS)}) "
                       f"and is not stored in {path.parent} yet; drawing it")
    idx = stratified_indices_checked(full, name, n, seed)
    created = store_subset(path, name, seed, idx, full.train_labels[idx], full.train16[idx],
                           _mnist_sha256(), pillow_version())
    if created:
        logger.info("drew %s with seed %d and stored it in %s", name, seed, path)
    return path, created


def stratified_indices_checked(full: Mnist16, name: str, n: int, seed: int) -> np.ndarray:
    from thermonet.data._subsets import stratified_indices

    idx = stratified_indices(full.train_labels, n, seed)
    check_balance(name, full.train_labels[idx])
    return idx


def load_dataset(name: str, *, mnist_dir: PathLike | None = None,
                 data_dir: PathLike | None = None, seed: int | None = None) -> Dataset:
    """Load a training set by name.

    Parameters
    ----------
    name : str
        ``D50``, ``D500``, ``D5000`` (embedded: work offline), ``D1000``, ``D50000`` (the paper's
        other index files; need full MNIST), or any ``D<n>`` with n divisible by 10: drawn once
        from ``seed`` (needs full MNIST) and stored in ``<data dir>/subsets/D<n>.h5``; later
        calls read that file. The original file names (``data50.txt``) are accepted as aliases.
    mnist_dir : path-like, optional
        Directory of the MNIST IDX files (default: ``$THERMONET_MNIST_DIR``, then
        ``<data dir>/mnist``).
    data_dir : path-like, optional
        User data directory (default: ``$THERMONET_DATA_DIR``, then ``~/.local/share/thermonet``).
    seed : int, optional
        Seed of a generated set. Ignored for the paper's sets. None (the default): a stored
        set whatever seed drew it (``thermonet data make-subset D200 --seed 1`` then works
        everywhere), or seed 0 to draw one. A stored set made with another seed than an
        explicit one raises :class:`DataError`.

    Returns
    -------
    Dataset
    """
    canonical, n = parse_name(name)
    seed = _check_seed(seed)
    if canonical in EMBEDDED_SUBSETS:
        return _embedded_train(canonical)
    if canonical in PAPER_SUBSETS:
        return _paper_train_from_mnist(canonical, mnist_dir, data_dir)
    path, _ = _ensure_subset(canonical, n, 0 if seed is None else seed, mnist_dir, data_dir)
    return _stored_train(path, canonical, seed)


def make_subset(name: str, *, seed: int = 0, mnist_dir: PathLike | None = None,
                data_dir: PathLike | None = None) -> tuple[pathlib.Path, bool]:
    """Draw and store the training set ``name`` (``D<n>``) from ``seed``, if not stored yet.

    Returns
    -------
    (path, created) : (pathlib.Path, bool)
        The HDF5 file, and whether this call created it (False: it was already stored with
        the same seed; a different seed raises :class:`DataError`).
    """
    canonical, n = parse_name(name)
    seed = int(_check_seed(seed) or 0)
    if canonical in PAPER_SUBSETS:
        raise DataError(f"{canonical} is one of the paper's training sets "
                        f"({PAPER_SUBSETS[canonical]}), used as shipped and never drawn; load it "
                        f"by name, or pick a size that is not a paper set "
                        f"({', '.join(PAPER_SUBSETS)})")
    path, created = _ensure_subset(canonical, n, seed, mnist_dir, data_dir)
    _stored_train(path, canonical, seed)  # validates the file and the seed
    return path, created


# ---------------------------------------------------------------------------------------------
# test sets

def official_test() -> Dataset:
    """The official 10,000 MNIST test images (from the embedded file: always available)."""
    emb = read_embedded()
    a, attrs = emb["arrays"], emb["attrs"]
    prov = _base_provenance("test", "embedded", _json(attrs["source_sha256"]),
                            str(attrs["pillow_version"]))
    prov.update(name=OFFICIAL_TEST_NAME, test_kind="official", embedded_file=str(emb["path"]))
    return Dataset(OFFICIAL_TEST_NAME, normalise(a["test/images16"]), a["test/labels"],
                   TEST_INDEX_OFFSET + np.arange(N_TEST, dtype=np.int64), prov)


def complement_test(train: Dataset, full: Mnist16) -> Dataset:
    """Every MNIST image not in ``train``: official test images, then the rest of train."""
    tr = np.asarray(train.indices)
    if tr.size and (tr.min() < 0 or tr.max() >= N_TRAIN):
        raise DataError(f"training set {train.name} has indices outside [0, {N_TRAIN}); the "
                        f"complement is defined for MNIST training subsets only")
    keep = np.ones(N_TRAIN, dtype=bool)
    keep[tr] = False
    rest = np.flatnonzero(keep)
    _check_pillow_consistency(train, full)
    images16 = np.concatenate([full.test16, full.train16[rest]])
    labels = np.concatenate([full.test_labels, full.train_labels[rest]])
    indices = np.concatenate([TEST_INDEX_OFFSET + np.arange(N_TEST, dtype=np.int64), rest])
    name = f"complement({train.name})"
    prov = _base_provenance("test", "mnist", _mnist_sha256(), pillow_version())
    prov.update(name=name, test_kind="complement", train_set=train.name, mnist_files=full.files,
                order="the 10,000 official test images, then the training images not in "
                      f"{train.name} in ascending index order")
    return Dataset(name, normalise(images16), labels, indices, prov)


def _check_pillow_consistency(train: Dataset, full: Mnist16) -> None:
    """Warn (log) if the local Pillow resizes the training images differently."""
    if train.provenance.get("source") == "mnist" or not len(train):
        return
    local = normalise(full.train16[train.indices])
    if not np.array_equal(local, train.x):
        logger.warning(
            "the training images of %s (from %s, Pillow %s) differ from this Pillow %s's resize "
            "of the same MNIST images; the complement test set uses this Pillow's resize",
            train.name, train.provenance.get("source"), train.provenance.get("pillow_version"),
            pillow_version())


def robot_arm_split() -> DataSplit:
    """The robot-arm problem's stored 200 training and 200 test cases
    (:mod:`thermonet.data._robot_arm`)."""
    arrays, prov = read_robot_arm()
    n_tr, n_te = len(arrays["y_train"]), len(arrays["y_test"])
    train = Dataset(ROBOT_ARM, arrays["x_train"], arrays["y_train"], np.arange(n_tr),
                    {**prov, "role": "train"})
    test = Dataset(f"{ROBOT_ARM}-test", arrays["x_test"], arrays["y_test"],
                   np.arange(n_te), {**prov, "role": "test"})
    return DataSplit(train, test, "official")


def load_data(name: str, *, test: str = "auto", mnist_dir: PathLike | None = None,
              data_dir: PathLike | None = None, seed: int | None = None) -> DataSplit:
    """Load a training set and its test set.

    Parameters
    ----------
    name, mnist_dir, data_dir, seed
        As in :func:`load_dataset`.
    test : {"auto", "complement", "official"}
        ``"complement"``: every MNIST image not in the training set (70,000 - n images: the
        10,000 official test images, then the remaining training images in ascending index
        order), as the paper's code built it; needs full MNIST. ``"official"``: the 10,000
        official test images (embedded, always available). ``"auto"`` (default): complement if
        the full MNIST files are found, else official.

    Returns
    -------
    DataSplit
        ``test_kind`` and ``test.name`` say which test set was used.
    """
    if name == ROBOT_ARM:
        return robot_arm_split()
    if test not in TEST_KINDS:
        raise DataError(f"test={test!r}; expected one of {', '.join(map(repr, TEST_KINDS))}")
    train = load_dataset(name, mnist_dir=mnist_dir, data_dir=data_dir, seed=seed)
    if test == "official":
        return DataSplit(train, official_test(), "official")
    try:
        files = find_mnist(mnist_dir, verify=False, data_dir=data_dir)  # mnist16() verifies
    except MnistNotFoundError as err:
        if test == "complement":
            raise MnistNotFoundError(f"the complement test set of {train.name} needs the full "
                                     f"MNIST files (or use test='official'). {err}") from None
        # the command that fixes a test set says so in one line (official_fallback_note)
        logger.debug("test set of %s: the official one (%s)", train.name, err)
        return DataSplit(train, official_test(), "official")
    return DataSplit(train, complement_test(train, mnist16(files)), "complement")


def official_fallback_note(name: str, test: str = "auto",
                           mnist_dir: PathLike | None = None) -> str:
    """One line for a command that fixes a test set: ``""`` unless ``test="auto"`` on the MNIST
    set ``name`` falls back to the official test images because full MNIST is not found."""
    if test != "auto" or name in (ROBOT_ARM, "none", "file"):
        return ""
    try:
        find_mnist(mnist_dir, verify=False)
    except MnistNotFoundError:
        return ("test set: the official 10,000 MNIST images (`thermonet data fetch` gets "
                "full MNIST, for the complement test set)")
    return ""


# ---------------------------------------------------------------------------------------------
# what is where

def data_info(mnist_dir: PathLike | None = None, data_dir: PathLike | None = None, *,
              verify: bool = True) -> dict[str, Any]:
    """A JSON-serialisable report: MNIST files and checksums, data dir, stored and offline sets."""
    directory, source = mnist_dir_path(mnist_dir, data_dir)
    files = []
    for spec in MNIST_FILES.values():
        cands = [p for p in (directory / spec.filename, directory / (spec.filename + ".gz"))
                 if p.is_file()]
        entry: dict[str, Any] = {"file": spec.filename, "path": str(cands[0]) if cands else None}
        if not cands:
            entry["status"] = "missing"
        elif not verify:
            entry["status"] = "present (not verified)"
        else:
            entry["status"] = "checksum mismatch"
            for cand in cands:
                try:
                    sha, _ = uncompressed_sha256(cand)
                except DataError as err:
                    entry.update(status="unreadable", detail=str(err))
                    continue
                if sha == spec.sha256:
                    entry.update(path=str(cand), status="ok")
                    break
            bad = [str(c) for c in cands if str(c) != entry["path"]]
            if entry["status"] == "ok" and bad:
                # an intact copy is used; the corrupt one beside it is reported, not hidden
                entry["status"] = "ok (corrupt copy ignored)"
                entry["detail"] = f"{', '.join(bad)} is corrupt: delete it"
        files.append(entry)
    ok_states = (("ok", "ok (corrupt copy ignored)") if verify
                 else ("ok", "present (not verified)"))
    mnist_ok = all(f["status"] in ok_states for f in files)

    ddir = data_dir_path(data_dir)
    ddir_source = "argument" if data_dir is not None else (
        DATA_ENV if os.environ.get(DATA_ENV) else "default")
    stored = list_stored_subsets(data_dir)

    embedded: dict[str, Any] = {"path": str(EMBEDDED_PATH)}
    try:
        emb = read_embedded()
        embedded.update(status="ok", bytes=EMBEDDED_PATH.stat().st_size,
                        pillow_version=str(emb["attrs"]["pillow_version"]),
                        subsets=list(EMBEDDED_SUBSETS), test_set=OFFICIAL_TEST_NAME)
    except DataError as err:
        embedded.update(status="error", detail=str(err))

    offline = ([*EMBEDDED_SUBSETS, OFFICIAL_TEST_NAME] if embedded["status"] == "ok" else [])
    offline += [s["name"] for s in stored if "error" not in s]
    needs_mnist = [s for s in PAPER_SUBSETS if s not in EMBEDDED_SUBSETS]
    needs_mnist += ["D<n> (new sizes, drawn from a seed)", "complement test sets"]
    return {
        "mnist_dir": str(directory),
        "mnist_dir_source": source,
        "mnist_files": files,
        "mnist_available": mnist_ok,
        "data_dir": str(ddir),
        "data_dir_source": ddir_source,
        "subsets_dir": str(subsets_dir(data_dir)),
        "stored_subsets": stored,
        "embedded": embedded,
        "available_offline": offline,
        "available": offline + (needs_mnist if mnist_ok else []),
        "needs_full_mnist": [] if mnist_ok else needs_mnist,
        "default_test_set": "complement" if mnist_ok else "official",
    }
