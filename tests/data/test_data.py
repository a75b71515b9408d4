"""Tests of the MNIST data pipeline (thermonet.data and `thermonet data`).

Tests marked ``mnist`` need the four original MNIST files, found ONLY through the environment
variable THERMONET_MNIST_DIR. They are skipped when it is unset, except under CI (env ``CI``
set), where a missing MNIST is a failure so that these tests cannot be skipped silently.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import json
import os
import pathlib
import runpy
import shutil
import sys
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import thermonet.data._datasets as datasets_mod
from thermonet.cli.data import data as data_cli
from thermonet.data import (
    DATA_ENV,
    EMBEDDED_PATH,
    MNIST_ENV,
    MNIST_FILES,
    PAPER_SUBSETS,
    Dataset,
    DataSplit,
    MnistNotFoundError,
    clear_caches,
    fetch_mnist,
    find_mnist,
    load_data,
    load_dataset,
    make_subset,
    normalise,
    official_test,
    parse_name,
    preprocess,
    read_idx,
    read_paper_subset,
    resize16,
    stratified_indices,
)
from thermonet.data._embedded import read_embedded
from thermonet.data._mnist import Mnist16
from thermonet.errors import DataError

REPO = pathlib.Path(__file__).resolve().parents[2]

# Baldock & Marzari's released code (float32 arithmetic of torchvision, printed to 8 digits)
SPEC_MIN, SPEC_MAX = -0.42421296, 2.8214867
# SHA-256 of load_dataset("D500").x.tobytes(): pins the embedded file and normalise()
D500_X_SHA256 = "03cb4746829015e0185fff14dd94f3aa6352686c46f49a9f7cee1c95cb31028a"


# ---------------------------------------------------------------------------------------------
# fixtures and helpers

@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Every test gets its own user data directory; nothing is written to ~/.local/share."""
    d = tmp_path / "userdata"
    monkeypatch.setenv(DATA_ENV, str(d))
    return d


@pytest.fixture
def no_mnist(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Simulate a machine without MNIST: THERMONET_MNIST_DIR points at an empty directory."""
    empty = tmp_path / "no-mnist"
    empty.mkdir()
    monkeypatch.setenv(MNIST_ENV, str(empty))
    return empty


@pytest.fixture(scope="session")
def mnist_dir() -> pathlib.Path:
    """The real MNIST directory, from THERMONET_MNIST_DIR only."""
    env = os.environ.get(MNIST_ENV)
    if not env:
        msg = f"{MNIST_ENV} is not set; these tests need the four MNIST files"
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set: MNIST tests must not be skipped)")
        pytest.skip(msg)
    try:
        find_mnist(env, verify=True)
    except DataError as err:
        pytest.fail(f"{MNIST_ENV}={env} is set but unusable: {err}")
    return pathlib.Path(env)


@pytest.fixture(scope="session")
def mnist_raw(mnist_dir: pathlib.Path) -> dict[str, np.ndarray]:
    files = find_mnist(mnist_dir)
    return {k: read_idx(p) for k, p in files.items()}


def idx_bytes(arr: np.ndarray) -> bytes:
    """Encode an array as an IDX file (independent of the reader under test)."""
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int16): 0x0B, np.dtype(np.float32): 0x0D}
    code = codes[arr.dtype]
    head = bytes([0, 0, code, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_fake_mnist(directory: pathlib.Path, gz: bool = True,
                     keys: tuple[str, ...] = tuple(MNIST_FILES)) -> None:
    """Valid IDX files under the MNIST names, but not the real contents (wrong checksums)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for key in keys:
        spec = MNIST_FILES[key]
        shape = (20, 28, 28) if "images" in key else (20,)
        arr = rng.integers(0, 10 if "labels" in key else 256, size=shape, dtype=np.uint8)
        raw = idx_bytes(arr)
        if gz:
            (directory / (spec.filename + ".gz")).write_bytes(gzip.compress(raw))
        else:
            (directory / spec.filename).write_bytes(raw)


def fake_full_mnist() -> Mnist16:
    """A synthetic full MNIST (balanced labels, random images) for storage-logic tests."""
    rng = np.random.default_rng(7)
    return Mnist16(
        train16=rng.integers(0, 256, size=(60000, 16, 16), dtype=np.uint8),
        train_labels=(np.arange(60000) % 10).astype(np.uint8),
        test16=rng.integers(0, 256, size=(10000, 16, 16), dtype=np.uint8),
        test_labels=(np.arange(10000) % 10).astype(np.uint8),
        sha256={k: "0" * 64 for k in MNIST_FILES},
        files={k: "/fake" for k in MNIST_FILES},
    )


@pytest.fixture
def fake_mnist(monkeypatch: pytest.MonkeyPatch, no_mnist: pathlib.Path) -> SimpleNamespace:
    """Replace full MNIST by a synthetic one; ``.calls`` counts how often it was needed."""
    fake = SimpleNamespace(full=fake_full_mnist(), calls=[])

    def full_mnist(*args: object, **kwargs: object) -> Mnist16:
        fake.calls.append(1)
        return fake.full

    monkeypatch.setattr(datasets_mod, "_full_mnist", full_mnist)
    return fake


def one_line(err: BaseException) -> str:
    msg = str(err)
    assert "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------
# preprocessing

def test_value_range_float64_and_float32() -> None:
    u = np.zeros((2, 16, 16), dtype=np.uint8)
    u[1] = 255
    x = normalise(u)
    assert x.dtype == np.float64 and x.shape == (2, 256) and x.flags.c_contiguous
    assert np.all(x[0] == (0 - 0.1307) / 0.3081) and np.all(x[1] == (1 - 0.1307) / 0.3081)
    assert abs(x.min() - SPEC_MIN) < 1e-7 and abs(x.max() - SPEC_MAX) < 2e-7
    # the spec's printed range is torchvision's float32 arithmetic, reproduced exactly
    x32 = normalise(u, dtype=np.float32)
    assert x32.dtype == np.float32
    assert x32.min() == np.float32(SPEC_MIN) and x32.max() == np.float32(SPEC_MAX)


def test_normalise_is_row_major_and_rejects_non_uint8() -> None:
    u = np.zeros((1, 16, 16), dtype=np.uint8)
    u[0, 3, 5] = 255
    x = normalise(u)
    assert np.flatnonzero(x[0] > 0).tolist() == [3 * 16 + 5]
    with pytest.raises(DataError, match="uint8"):
        normalise(u.astype(np.float64))
    with pytest.raises(DataError, match=r"\(n, 28, 28\)"):
        resize16(np.zeros((2, 16, 16), dtype=np.uint8))


def test_resize16_is_pillow_bilinear_rounded() -> None:
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    out = resize16(imgs)
    assert out.dtype == np.uint8 and out.shape == (5, 16, 16)
    for img, o in zip(imgs, out, strict=True):
        ref = Image.frombytes("L", (28, 28), img.tobytes()).resize((16, 16), Image.BILINEAR)
        np.testing.assert_array_equal(o, np.frombuffer(ref.tobytes(), np.uint8).reshape(16, 16))
    # antialiased: a constant image stays constant, a checkerboard is averaged to ~mid grey
    assert np.all(resize16(np.full((1, 28, 28), 200, np.uint8)) == 200)
    checker = ((np.indices((28, 28)).sum(0) % 2) * 255).astype(np.uint8)[None]
    assert np.all(np.abs(resize16(checker)[0, 2:-2, 2:-2].astype(int) - 127) < 20)


@pytest.mark.parametrize(("name", "n_constant"), [("D50", 63), ("D500", 25), ("D5000", 9)])
def test_constant_pixels_match_spec(name: str, n_constant: int) -> None:
    x = load_dataset(name).x
    const = np.flatnonzero(x.max(axis=0) == x.min(axis=0))
    assert const.size == n_constant
    assert np.all(np.abs(x[:, const] - SPEC_MIN) < 1e-7)


def test_d500_inputs_are_pinned() -> None:
    ds = load_dataset("D500")
    assert hashlib.sha256(ds.x.tobytes()).hexdigest() == D500_X_SHA256


@pytest.mark.mnist
def test_uint8_rounding_of_the_resize_matters(mnist_raw: dict[str, np.ndarray]) -> None:
    idx = read_paper_subset("D500")
    imgs = mnist_raw["train-images"][idx]
    x = preprocess(imgs)
    np.testing.assert_array_equal(x, load_dataset("D500").x)
    # the same bilinear filter in float ('F' mode) without the uint8 rounding
    xf = np.stack([np.asarray(Image.fromarray(im.astype(np.float32)).resize(
        (16, 16), Image.Resampling.BILINEAR)) for im in imgs]).reshape(len(idx), 256)
    xf = (xf.astype(np.float64) / 255.0 - 0.1307) / 0.3081
    grey_levels = np.abs(xf - x) * 0.3081 * 255  # difference in units of 1/255
    assert grey_levels.max() < 1.0 + 1e-6  # the same filter: at most one grey level apart ...
    assert np.count_nonzero(grey_levels > 0.1) > 10000  # ... but often measurably different
    assert np.count_nonzero(grey_levels > 0.5) > 100  # (uint8 rounding of each pass)


# ---------------------------------------------------------------------------------------------
# names and the paper's subsets

def test_parse_name() -> None:
    assert parse_name("D500") == ("D500", 500)
    assert parse_name("data50.txt") == ("D500", 500)
    assert parse_name("data7") == ("D70", 70)
    for bad, match in [("D205", "multiple of 10"), ("D0", "multiple of 10"),
                       ("D70000", "60000"), ("mnist", "unknown data set name")]:
        with pytest.raises(DataError, match=match) as exc:
            parse_name(bad)
        one_line(exc.value)


def test_paper_subsets_balanced_and_in_file_order() -> None:
    for name in ("D50", "D500", "D5000"):
        ds = load_dataset(name)
        n = int(name[1:])
        assert len(ds) == n and ds.x.shape == (n, 256) and ds.y.dtype == np.int64
        assert np.bincount(ds.y, minlength=10).tolist() == [n // 10] * 10
        assert np.unique(ds.indices).size == n
        lines = (REPO / "thermonet/data/paper_subsets" / PAPER_SUBSETS[name]).read_text()
        assert ds.indices.tolist() == [int(t.split()[0]) for t in lines.splitlines()]
        assert ds.provenance["subset_file"] == PAPER_SUBSETS[name]


def test_paper_subset_overlaps() -> None:
    d50, d500, d5000 = (set(read_paper_subset(n).tolist()) for n in ("D50", "D500", "D5000"))
    assert not d50 & d500
    assert len(d500 & d5000) == 42


def test_packaged_subset_files_are_the_originals() -> None:
    """SHA-256 of the files of rjnbaldock/nn_sample, as in ../shared/data/paper_subsets."""
    expected = {
        "data5.txt": "fe3fd5892798b1cf617516867053f3d560abd85044bc1a4d961d4b028558313e",
        "data50.txt": "97f3c5784f839cbe8f54f4d767baff5a2d9b15c3d535234291444632fbafc851",
        "data500.txt": "0ac68c8a3105bf908d39be2e26a64dc7ca27f537f7082ce9867fd21d16ba47db",
        "data100.txt": "77dd04c56883926ad1a49d794a7e5704bc0dcd7fc2c6627c05c95e5fc388d376",
        "data5000.txt": "d57eedad186cc15870ac2ca49c33a1331e96ffd6f1a07a01ad326f50a502806f",
    }
    assert set(expected) == set(PAPER_SUBSETS.values())
    for fname, sha in expected.items():
        data = (REPO / "thermonet/data/paper_subsets" / fname).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha, fname
    readme = (REPO / "thermonet/data/paper_subsets/README.txt").read_text()
    assert "MIT" in readme and "Robert Baldock" in readme


@pytest.mark.mnist
def test_all_paper_subsets_balanced_with_mnist(mnist_raw: dict[str, np.ndarray]) -> None:
    labels = mnist_raw["train-labels"]
    for name in PAPER_SUBSETS:
        idx = read_paper_subset(name)
        n = int(name[1:])
        assert idx.size == np.unique(idx).size == n
        assert np.bincount(labels[idx], minlength=10).tolist() == [n // 10] * 10
    ds = load_dataset("D1000")
    assert ds.provenance["source"] == "mnist" and not ds.provenance["embedded"]
    np.testing.assert_array_equal(ds.y, labels[read_paper_subset("D1000")])


# ---------------------------------------------------------------------------------------------
# embedded file and offline loading

def test_offline_loading_uses_embedded_and_official(no_mnist: pathlib.Path) -> None:
    split = load_data("D500")
    assert isinstance(split, DataSplit) and split.test_kind == "official"
    assert split.train.provenance["embedded"] is True
    assert split.test.name == "mnist-t10k" and len(split.test) == 10000
    np.testing.assert_array_equal(split.test.indices, 60000 + np.arange(10000))
    json.dumps(split.train.provenance)
    json.dumps(split.test.provenance)
    assert split.train.provenance["source_sha256"]["train-images-idx3-ubyte"] == \
        MNIST_FILES["train-images"].sha256

    with pytest.raises(MnistNotFoundError) as exc:
        load_data("D500", test="complement")
    msg = one_line(exc.value)
    assert "thermonet data fetch" in msg and MNIST_ENV in msg and str(no_mnist) in msg
    with pytest.raises(MnistNotFoundError, match="D200"):
        load_dataset("D200")
    with pytest.raises(MnistNotFoundError, match="D1000"):
        load_dataset("D1000")
    with pytest.raises(DataError, match="'auto', 'complement', 'official'"):
        load_data("D500", test="bogus")


def test_corrupt_mnist_is_an_error_not_a_fallback(tmp_path: pathlib.Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_mnist(tmp_path / "m")
    monkeypatch.setenv(MNIST_ENV, str(tmp_path / "m"))
    with pytest.raises(DataError, match="checksum mismatch") as exc:
        load_data("D500")
    assert not isinstance(exc.value, MnistNotFoundError)


def test_embedded_file_integrity_check(tmp_path: pathlib.Path) -> None:
    info = read_embedded()
    assert EMBEDDED_PATH.stat().st_size < 2_200_000
    assert info["attrs"]["pillow_version"] and "--mnist-dir" in info["attrs"]["build_command"]
    copy = tmp_path / "emb.h5"
    shutil.copyfile(EMBEDDED_PATH, copy)
    with h5py.File(copy, "r+") as f:
        f["test/labels"][0] = (f["test/labels"][0] + 1) % 10
    with pytest.raises(DataError, match="corrupt: test/labels") as exc:
        read_embedded(copy)
    one_line(exc.value)
    with pytest.raises(DataError, match="missing"):
        read_embedded(tmp_path / "nope.h5")


@pytest.mark.slow
@pytest.mark.mnist
def test_embedded_equals_rebuild_from_real_mnist(mnist_dir: pathlib.Path, tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    clear_caches()  # really re-read, re-verify and re-resize the MNIST files
    out = tmp_path / "rebuilt.h5"
    # the documented command, run in-process
    script = REPO / "scripts" / "build_embedded_data.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--mnist-dir", str(mnist_dir),
                                      "--out", str(out)])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_info.value.code == 0
    shipped, rebuilt = read_embedded(EMBEDDED_PATH), read_embedded(out)
    assert shipped["arrays"].keys() == rebuilt["arrays"].keys()
    for key, arr in shipped["arrays"].items():
        np.testing.assert_array_equal(arr, rebuilt["arrays"][key], err_msg=key)
    for attr in ("source_sha256", "content_sha256", "preprocessing", "subset_files"):
        assert shipped["attrs"][attr] == rebuilt["attrs"][attr]


@pytest.mark.mnist
def test_embedded_loading_is_bit_identical_to_real_files(
        mnist_dir: pathlib.Path, mnist_raw: dict[str, np.ndarray], tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with_mnist = {name: load_data(name) for name in ("D50", "D500", "D5000")}
    monkeypatch.setenv(MNIST_ENV, str(tmp_path / "empty"))
    for name, split in with_mnist.items():
        assert split.test_kind == "complement"
        offline = load_data(name)
        assert offline.test_kind == "official" and offline.test.name == "mnist-t10k"
        idx = read_paper_subset(name)
        from_files = preprocess(mnist_raw["train-images"][idx])
        for ds in (split.train, offline.train):
            np.testing.assert_array_equal(ds.x, from_files)
            np.testing.assert_array_equal(ds.y, mnist_raw["train-labels"][idx])
    official = official_test()
    np.testing.assert_array_equal(official.x, preprocess(mnist_raw["t10k-images"]))
    np.testing.assert_array_equal(official.y, mnist_raw["t10k-labels"])


# ---------------------------------------------------------------------------------------------
# complement test set

@pytest.mark.mnist
@pytest.mark.parametrize("name", ["D50", "D500"])
def test_complement_test_set(name: str, mnist_dir: pathlib.Path,
                             mnist_raw: dict[str, np.ndarray]) -> None:
    split = load_data(name, test="complement")
    train, test = split.train, split.test
    n = len(train)
    assert split.test_kind == "complement" and test.name == f"complement({name})"
    assert len(test) == 70000 - n and test.x.shape == (70000 - n, 256)
    assert not np.intersect1d(train.indices, test.indices).size
    assert np.array_equal(np.sort(np.concatenate([train.indices, test.indices])),
                          np.arange(70000))
    np.testing.assert_array_equal(test.indices[:10000], 60000 + np.arange(10000))
    rest = test.indices[10000:]
    assert np.all(np.diff(rest) > 0) and rest.max() < 60000
    official = official_test()
    np.testing.assert_array_equal(test.x[:10000], official.x)
    np.testing.assert_array_equal(test.y[:10000], mnist_raw["t10k-labels"])
    np.testing.assert_array_equal(test.y[10000:], mnist_raw["train-labels"][rest])
    pick = rest[::997]
    rows = 10000 + np.searchsorted(rest, pick)
    np.testing.assert_array_equal(test.x[rows], preprocess(mnist_raw["train-images"][pick]))
    assert load_data(name, test="official").test_kind == "official"


# ---------------------------------------------------------------------------------------------
# IDX reader and checksums

def test_read_idx_round_trip(tmp_path: pathlib.Path) -> None:
    for arr in (np.arange(12, dtype=np.int16).reshape(3, 4) - 5,
                np.linspace(-1, 1, 6, dtype=np.float32), np.arange(8, dtype=np.uint8)):
        p = tmp_path / "a.idx.gz"
        p.write_bytes(gzip.compress(idx_bytes(arr)))
        out = read_idx(p)
        assert out.dtype == arr.dtype and out.dtype.isnative
        np.testing.assert_array_equal(out, arr)


def test_read_idx_truncated(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(idx_bytes(np.zeros((100, 28, 28), np.uint8))[: 16 + 1000])
    with pytest.raises(DataError) as exc:
        read_idx(p)
    msg = one_line(exc.value)
    for part in ("train-images-idx3-ubyte", "truncated", "78,400", "1,000", "(100, 28, 28)"):
        assert part in msg
    p.write_bytes(idx_bytes(np.zeros((3,), np.uint8)) + b"\x00")
    with pytest.raises(DataError, match="oversized"):
        read_idx(p)
    with pytest.raises(DataError, match="does not exist") as exc:
        read_idx(tmp_path / "t10k-images-idx3-ubyte.gz")
    assert "t10k-images-idx3-ubyte.gz" in one_line(exc.value)


def test_read_idx_wrong_magic(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "t10k-labels-idx1-ubyte"
    p.write_bytes(b"\x12\x34\x08\x01" + bytes(10))
    with pytest.raises(DataError) as exc:
        read_idx(p)
    msg = one_line(exc.value)
    assert "t10k-labels-idx1-ubyte" in msg and "magic" in msg and "0x12340801" in msg
    p.write_bytes(b"\x00\x00\x07\x01" + bytes(10))  # unknown type code
    with pytest.raises(DataError, match="magic"):
        read_idx(p)


@pytest.mark.parametrize("dims", [
    (0, 2 ** 32 - 1, 2 ** 32 - 1),          # an empty payload, yet no array numpy can make
    (2 ** 32 - 1,) * 3,                      # the product overflows int64
])
def test_read_idx_impossible_shape(tmp_path: pathlib.Path, dims: tuple[int, ...]) -> None:
    import struct

    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(b"\x00\x00\x08" + bytes([len(dims)]) + b"".join(struct.pack(">I", d)
                                                                   for d in dims))
    with pytest.raises(DataError) as exc:
        read_idx(p)
    msg = one_line(exc.value)
    assert "train-images-idx3-ubyte" in msg and "larger than any array" in msg


def test_read_idx_bad_gzip(tmp_path: pathlib.Path) -> None:
    good = gzip.compress(idx_bytes(np.arange(1000, dtype=np.uint8) % 7))
    p = tmp_path / "train-labels-idx1-ubyte.gz"
    for broken in (good[:10] + b"garbage!" * 20, good[: len(good) // 2]):
        p.write_bytes(broken)
        with pytest.raises(DataError) as exc:
            read_idx(p)
        msg = one_line(exc.value)
        assert "train-labels-idx1-ubyte.gz" in msg and "bad gzip" in msg
    p.write_bytes(idx_bytes(np.arange(4, dtype=np.uint8)))  # raw bytes under a .gz name
    with pytest.raises(DataError, match="not a gzip file"):
        read_idx(p)


def test_find_mnist_missing(tmp_path: pathlib.Path) -> None:
    with pytest.raises(MnistNotFoundError) as exc:
        find_mnist(tmp_path / "nowhere")
    msg = one_line(exc.value)
    assert "does not exist" in msg and "thermonet data fetch" in msg and MNIST_ENV in msg
    write_fake_mnist(tmp_path / "half", keys=("train-images", "train-labels"))
    with pytest.raises(MnistNotFoundError) as exc:
        find_mnist(tmp_path / "half")
    msg = one_line(exc.value)
    assert "t10k-images-idx3-ubyte" in msg and "t10k-labels-idx1-ubyte" in msg
    assert "train-images-idx3-ubyte" not in msg


def test_find_mnist_checksum_mismatch(tmp_path: pathlib.Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_mnist(tmp_path / "m", gz=False)
    with pytest.raises(DataError) as exc:
        find_mnist(tmp_path / "m")
    msg = one_line(exc.value)
    assert "checksum mismatch" in msg and "SHA-256" in msg and "thermonet data fetch" in msg
    assert "-idx" in msg and "15,696 bytes" in msg  # the file and its (wrong) size
    # without verification the files are found; via the env var too
    monkeypatch.setenv(MNIST_ENV, str(tmp_path / "m"))
    files = find_mnist(verify=False)
    assert set(files) == set(MNIST_FILES)
    assert files["t10k-labels"] == tmp_path / "m" / "t10k-labels-idx1-ubyte"


@pytest.mark.mnist
def test_find_mnist_accepts_raw_and_gz(mnist_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for key, spec in MNIST_FILES.items():
        src = mnist_dir / (spec.filename + ".gz")
        if "labels" in key:
            (mixed / spec.filename).write_bytes(gzip.decompress(src.read_bytes()))
        else:
            (mixed / (spec.filename + ".gz")).symlink_to(src.resolve())
    files = find_mnist(mixed)
    assert files["train-labels"].name == "train-labels-idx1-ubyte"
    assert files["train-images"].name == "train-images-idx3-ubyte.gz"
    np.testing.assert_array_equal(load_dataset("D1000", mnist_dir=mixed).y,
                                  load_dataset("D1000").y)


# ---------------------------------------------------------------------------------------------
# generated subsets

def naive_walk(labels: np.ndarray, n: int, seed: int) -> list[int]:
    """The original sampleFromClass loop, literally (with a seeded generator)."""
    perm = np.random.default_rng(seed).permutation(np.arange(len(labels)))
    count = [0] * 10
    keep = []
    for i in perm:
        count[labels[i]] += 1
        if count[labels[i]] <= n // 10:
            keep.append(int(i))
    return keep


def test_stratified_indices_is_the_original_walk() -> None:
    labels = np.random.default_rng(0).integers(0, 10, size=60000).astype(np.uint8)
    for n, seed in [(10, 0), (200, 5), (1230, 123)]:
        idx = stratified_indices(labels, n, seed)
        assert idx.tolist() == naive_walk(labels, n, seed)
        assert np.bincount(labels[idx], minlength=10).tolist() == [n // 10] * 10
    assert not np.array_equal(stratified_indices(labels, 200, 1),
                              stratified_indices(labels, 200, 2))
    with pytest.raises(DataError, match="divisible by 10"):
        stratified_indices(labels, 205, 0)
    with pytest.raises(DataError, match="largest stratified set"):
        stratified_indices(labels, 60000, 0)


def test_generated_subset_stored_and_reused(fake_mnist: SimpleNamespace,
                                            _isolated_data_dir: pathlib.Path) -> None:
    ds = load_dataset("D200", seed=3)
    path = _isolated_data_dir / "subsets" / "D200.h5"
    assert path.is_file() and ds.provenance["seed"] == 3
    assert ds.provenance["source"] == "stored-subset"
    np.testing.assert_array_equal(ds.indices, stratified_indices(fake_mnist.full.train_labels, 200, 3))
    np.testing.assert_array_equal(ds.x, normalise(fake_mnist.full.train16[ds.indices]))
    assert len(fake_mnist.calls) == 1
    st = path.stat()
    again = load_dataset("D200", seed=3)
    assert len(fake_mnist.calls) == 1  # no redraw
    st2 = path.stat()
    assert (st2.st_mtime_ns, st2.st_ino, st2.st_size) == (st.st_mtime_ns, st.st_ino, st.st_size)
    np.testing.assert_array_equal(again.x, ds.x)
    np.testing.assert_array_equal(again.indices, ds.indices)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp files

    with pytest.raises(DataError) as exc:
        load_dataset("D200", seed=4)
    msg = one_line(exc.value)
    assert "seed 3" in msg and "seed 4" in msg and str(path) in msg
    assert make_subset("D200", seed=3) == (path, False)
    with pytest.raises(DataError, match="seed 3"):
        make_subset("D200", seed=0)

    with h5py.File(path, "r") as f:
        assert f.attrs["seed"] == 3 and f.attrs["n"] == 200 and "permutation" in f.attrs[
            "algorithm"]
        assert json.loads(f.attrs["preprocessing"])["std"] == 0.3081
    split = load_data("D200", seed=3)  # MNIST absent: stored training set + official test set
    assert split.test_kind == "official"


def test_generated_subset_errors(fake_mnist: SimpleNamespace, _isolated_data_dir: pathlib.Path) -> None:
    with pytest.raises(DataError, match="multiple of 10"):
        load_dataset("D205")
    with pytest.raises(DataError, match="paper's training sets"):
        make_subset("D500", seed=1)
    with pytest.raises(DataError, match="non-negative integer"):
        load_dataset("D100", seed=-1)
    bad = _isolated_data_dir / "subsets" / "D300.h5"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not hdf5")
    with pytest.raises(DataError, match="delete it") as exc:
        load_dataset("D300")
    one_line(exc.value)
    assert not fake_mnist.calls


@pytest.mark.mnist
def test_generated_subset_from_real_mnist(mnist_dir: pathlib.Path,
                                          mnist_raw: dict[str, np.ndarray],
                                          _isolated_data_dir: pathlib.Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    labels = mnist_raw["train-labels"]
    split = load_data("D120", seed=11)
    ds = split.train
    assert ds.indices.tolist() == naive_walk(labels, 120, 11)
    np.testing.assert_array_equal(ds.x, preprocess(mnist_raw["train-images"][ds.indices]))
    assert len(split.test) == 70000 - 120 and split.test_kind == "complement"
    monkeypatch.setenv(MNIST_ENV, str(_isolated_data_dir / "empty"))
    offline = load_dataset("D120", seed=11)  # from the stored file
    np.testing.assert_array_equal(offline.x, ds.x)


# ---------------------------------------------------------------------------------------------
# fetch

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def http_root(tmp_path: pathlib.Path) -> Iterator[tuple[pathlib.Path, str, list[str]]]:
    """A loopback HTTP server serving tmp_path/www; yields (root, base URL, request log)."""
    root = tmp_path / "www"
    root.mkdir()
    requests: list[str] = []

    class Handler(_QuietHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _make_mirrors(root: pathlib.Path, base: str) -> tuple[str, str]:
    (root / "empty").mkdir()  # everything 404s
    write_fake_mnist(root / "bad")  # valid gzip+IDX, wrong checksums
    (root / "bad" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8bnot really gzip")
    return f"{base}/empty/", f"{base}/bad"


def test_fetch_fails_cleanly_when_no_mirror_has_the_files(
        http_root: tuple[pathlib.Path, str, list[str]], tmp_path: pathlib.Path) -> None:
    root, base, _ = http_root
    m404, mbad = _make_mirrors(root, base)
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as exc:
        fetch_mnist(dest, mirrors=[m404, mbad], timeout=5)
    msg = one_line(exc.value)
    assert "train-images-idx3-ubyte.gz" in msg and "HTTP 404" in msg
    assert "wrong SHA-256" in msg
    assert list(dest.iterdir()) == []  # nothing partial left behind, under any name
    result = CliRunner().invoke(data_cli, ["fetch", "--dest", str(dest), "--mirror", m404])
    assert result.exit_code == 1 and "HTTP 404" in result.output
    assert "Traceback" not in result.output


@pytest.mark.mnist
def test_fetch_falls_back_to_a_good_mirror(
        mnist_dir: pathlib.Path, http_root: tuple[pathlib.Path, str, list[str]],
        tmp_path: pathlib.Path) -> None:
    root, base, requests = http_root
    m404, mbad = _make_mirrors(root, base)
    (root / "good").mkdir()
    for spec in MNIST_FILES.values():
        shutil.copyfile(mnist_dir / (spec.filename + ".gz"), root / "good" / (spec.filename + ".gz"))
    dest = tmp_path / "dest"
    files = fetch_mnist(dest, mirrors=[m404, mbad, f"{base}/good/"], timeout=10)
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        s.filename + ".gz" for s in MNIST_FILES.values())
    assert set(files) == set(MNIST_FILES)
    assert find_mnist(dest) == files
    assert any(r.startswith("/empty/") for r in requests)
    assert any(r.startswith("/bad/") for r in requests)
    n_requests = len(requests)
    # already present and verified: no download; through the CLI, as users run it
    result = CliRunner().invoke(data_cli, ["fetch", "--dest", str(dest), "--mirror", m404])
    assert result.exit_code == 0, result.output
    assert len(requests) == n_requests
    assert f"export THERMONET_MNIST_DIR={dest}" in result.output


# ---------------------------------------------------------------------------------------------
# Dataset / CLI

def test_dataset_container() -> None:
    ds = Dataset("toy", np.ones((3, 4), np.float32), [0, 1, 2], [5, 6, 7], {"a": 1})
    assert len(ds) == 3 and ds.x.dtype == np.float64 and ds.y.dtype == np.int64
    assert ds.indices.dtype == np.int64 and ds.x.flags.c_contiguous
    with pytest.raises(DataError, match="expected"):
        Dataset("bad", np.ones((3, 4)), [0, 1], [0, 1, 2])
    with pytest.raises(DataError, match="test_kind"):
        DataSplit(ds, ds, "everything")
    with pytest.raises(AttributeError):
        ds.name = "other"  # type: ignore[misc]


def test_cli_info_without_mnist(no_mnist: pathlib.Path, _isolated_data_dir: pathlib.Path) -> None:
    result = CliRunner().invoke(data_cli, ["info"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert str(no_mnist) in out and MNIST_ENV in out and "missing" in out
    assert "not available" in out and "available offline: D50, D500, D5000, mnist-t10k" in out
    assert str(_isolated_data_dir / "subsets") in out and "default test set:  official" in out


@pytest.mark.mnist
def test_cli_info_with_mnist(mnist_dir: pathlib.Path) -> None:
    result = CliRunner().invoke(data_cli, ["info"])
    assert result.exit_code == 0, result.output
    assert result.output.count("  ok ") == 4 and "default test set:  complement" in result.output


def test_cli_make_subset(fake_mnist: SimpleNamespace, _isolated_data_dir: pathlib.Path) -> None:
    runner = CliRunner()
    result = runner.invoke(data_cli, ["make-subset", "D30", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "D30: 30 images, seed 2, stored" in result.output
    assert "per class: 3, 3, 3, 3, 3, 3, 3, 3, 3, 3" in result.output
    assert (_isolated_data_dir / "subsets" / "D30.h5").is_file()
    result = runner.invoke(data_cli, ["make-subset", "D30", "--seed", "2"])
    assert result.exit_code == 0 and "already stored" in result.output
    info = runner.invoke(data_cli, ["info"])
    assert "D30      n=30 seed=2" in info.output
    for args, match in [(["make-subset", "D30", "--seed", "5"], "seed 2"),
                        (["make-subset", "D35"], "multiple of 10"),
                        (["make-subset", "D5000"], "paper's training sets")]:
        result = runner.invoke(data_cli, args)
        assert result.exit_code == 1 and match in result.output
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_build_embedded_without_mnist(no_mnist: pathlib.Path, tmp_path: pathlib.Path) -> None:
    result = CliRunner().invoke(data_cli, ["build-embedded", "--out", str(tmp_path / "x.h5")])
    assert result.exit_code == 1 and "MNIST not found" in result.output
    assert not (tmp_path / "x.h5").exists()
