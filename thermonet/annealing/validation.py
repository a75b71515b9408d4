"""The validation set: for the MNIST classifiers, MNIST training images outside the training
set, stratified by class, never overlapping the test set; for regression sets, cases held out
of the training set (:func:`hold_out`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.types import IntArray


def validation_pool_images(train: Any, pool: str) -> tuple[IntArray, np.ndarray, np.ndarray, str]:
    """MNIST training images not in ``train``: (indices, labels, uint8 16x16 images, pool)."""
    from thermonet.data import N_TRAIN, MnistNotFoundError, find_mnist, mnist16, read_embedded

    if pool in ("auto", "mnist"):
        try:
            files = find_mnist(verify=False)
        except MnistNotFoundError as err:
            if pool == "mnist":
                raise MnistNotFoundError(f"anneal.validation_pool = \"mnist\" needs the full "
                                         f"MNIST files (or use \"embedded\"). {err}") from None
        else:
            full = mnist16(files)
            keep = np.ones(N_TRAIN, dtype=bool)
            keep[np.asarray(train.indices)] = False
            idx = np.flatnonzero(keep).astype(np.int64)
            return idx, full.train_labels[idx], full.train16[idx], "mnist"
    arrays = read_embedded()["arrays"]
    all_idx = np.asarray(arrays["train/indices"], dtype=np.int64)
    keep = ~np.isin(all_idx, np.asarray(train.indices))
    return (all_idx[keep], np.asarray(arrays["train/labels"])[keep],
            np.asarray(arrays["train/images16"])[keep], "embedded")


def make_validation(train: Any, n: int, seed_seq: np.random.SeedSequence,
                    pool: str = "auto") -> Any:
    """A stratified validation set of ``n`` MNIST training images not in ``train``.

    ``perm = default_rng(seed_seq).permutation(len(pool))``; walking ``perm``, an image is kept
    while its class has fewer than n/10 kept (as the paper's subsets were drawn). The kept
    images are returned in ascending MNIST index order.

    Parameters
    ----------
    train : Dataset
        The training set (its ``indices`` are excluded).
    n : int
        Number of validation images, a multiple of 10.
    seed_seq : numpy.random.SeedSequence
    pool : {"auto", "mnist", "embedded"}

    Returns
    -------
    Dataset
        Named ``validation(<train name>)``; ``provenance["pool"]`` says where it came from.
    """
    from thermonet.data import Dataset, normalise
    from thermonet.errors import ConfigError, DataError

    if n % 10:
        raise ConfigError(f"anneal.n_validation = {n}; the MNIST classifiers' validation set "
                          "takes n/10 images of each class: expected a multiple of 10")
    if pool == "train":
        raise ConfigError("anneal.validation_pool = \"train\" holds cases out of a regression "
                          f"training set; {train.name} is an MNIST training subset, whose "
                          "validation images come from outside it: use auto, mnist or embedded")
    idx, labels, images16, used = validation_pool_images(train, pool)
    per_class = n // 10
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=10)
    if np.any(counts < per_class):
        raise DataError(f"anneal.n_validation = {n} needs {per_class} images of each class, "
                        f"but the {used} pool of images outside {train.name} has only "
                        f"{int(counts.min())} of class {int(counts.argmin())}; lower "
                        "n_validation or use validation_pool = \"mnist\" (full MNIST)")
    perm = np.random.default_rng(seed_seq).permutation(idx.size)
    lab = np.asarray(labels)[perm]
    keep = np.zeros(idx.size, dtype=bool)
    for c in range(10):
        keep[np.flatnonzero(lab == c)[:per_class]] = True
    rows = np.sort(perm[keep])
    prov = {"role": "validation", "pool": used, "train_set": train.name,
            "selection": "stratified, n/10 per class, seeded permutation of the pool"}
    return Dataset(f"validation({train.name})", normalise(images16[rows]), labels[rows],
                   idx[rows], prov)


def hold_out(train: Any, n: int, seed_seq: np.random.SeedSequence, pool: str = "auto"
             ) -> tuple[Any, Any]:
    """``n`` cases of a regression training set held out for validation, and the rest.

    ``perm = default_rng(seed_seq).permutation(len(train))``; the first ``n`` of ``perm`` are
    the validation set, the others the training set the anneal samples on (both in their
    original order). As Neal (1993) notes of conventional training, the held-out cases are
    lost to the fit.

    Returns
    -------
    (Dataset, Dataset)
        The validation set ``validation(<train name>)`` and the remaining training set
        ``<train name>-validation``; ``provenance["pool"]`` is ``"train"``.
    """
    from thermonet.data import Dataset
    from thermonet.errors import ConfigError, DataError

    if pool not in ("auto", "train"):
        raise ConfigError(f"anneal.validation_pool = {pool!r} draws MNIST images; the regression "
                          f"set {train.name} holds its validation cases out of the training "
                          "set: use auto or train")
    if not 1 <= n < len(train):
        raise DataError(f"anneal.n_validation = {n} for the {len(train)} training cases of "
                        f"{train.name}; expected 1 <= n_validation < {len(train)} (the rest is "
                        "what the anneal fits)")
    perm = np.random.default_rng(seed_seq).permutation(len(train))
    held, kept = np.sort(perm[:n]), np.sort(perm[n:])
    base = dict(train.provenance)
    val = Dataset(f"validation({train.name})", train.x[held], train.y[held],
                  train.indices[held], {**base, "role": "validation", "pool": "train",
                                        "train_set": train.name,
                                        "selection": "seeded permutation of the training set"})
    rest = Dataset(f"{train.name}-validation", train.x[kept], train.y[kept],
                   train.indices[kept], {**base, "removed": n})
    return val, rest


def without(data: Any, indices: IntArray, name: str) -> Any:
    """``data`` without the images whose MNIST index is in ``indices`` (order kept)."""
    from thermonet.data import Dataset

    keep = ~np.isin(data.indices, indices)
    prov = {**dict(data.provenance), "name": name, "removed": int(np.count_nonzero(~keep))}
    return Dataset(name, data.x[keep], data.y[keep], data.indices[keep], prov)
