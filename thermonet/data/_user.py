"""A user's regression data from a CSV, NPZ or HDF5 file: named input and output columns, a
train/test split (a second file, a 0/1 column, or a fraction drawn from a seed) and optional
standardisation whose constants travel with the data, so predictions can be put back in the
file's units.

CSV: a header row of column names, then one case per row of numbers (lines starting with
``#`` are skipped). NPZ: arrays by name, each of shape ``(n,)`` (one column) or ``(n, k)`` (k
columns named ``name[0]`` .. ``name[k-1]``; the bare name selects all k). HDF5 (``.h5``,
``.hdf5``): datasets by name (a path such as ``"run1/x"`` inside groups) with the shapes of NPZ
arrays; only the datasets the configuration names are read, ``inputs`` and ``targets`` when it
names none. Every problem is a one-line :class:`~thermonet.errors.DataError` naming the file,
what was found and the fix.
"""

from __future__ import annotations

import csv
import hashlib
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from thermonet.data._datasets import Dataset, DataSplit
from thermonet.errors import DataError

HDF5_SUFFIXES = (".h5", ".hdf5")
FILE_SUFFIXES = (".csv", ".npz", *HDF5_SUFFIXES)
#: the HDF5 datasets read when data.inputs / data.outputs are empty
HDF5_DEFAULT_INPUTS, HDF5_DEFAULT_OUTPUTS = ("inputs",), ("targets",)
#: the split stream is a child of the run's seed that no other stream of the run uses
SPLIT_SPAWN_KEY = (0xDA7A,)


def file_sha256(path: str | pathlib.Path) -> str:
    """SHA-256 of a data file's bytes (a run records it; a changed file is then refused)."""
    p = pathlib.Path(path)
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise DataError(f"data file {p} does not exist; check data.path (relative paths are "
                        "relative to the configuration file)") from None
    except OSError as err:
        raise DataError(f"cannot read data file {p}: {err.strerror or err}; check data.path "
                        "(relative paths are relative to the configuration file)") from None


def read_columns(path: str | pathlib.Path,
                 wanted: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
    """The columns of a CSV, NPZ or HDF5 file as float64 arrays of shape (n,) or (n, k).

    ``wanted`` (HDF5 only; CSV and NPZ are read whole) maps each dataset to read to the
    configuration key that names it, for the error when it is missing; None reads them all.
    """
    p = pathlib.Path(path)
    suffix = p.suffix.lower()
    if suffix not in FILE_SUFFIXES:
        raise DataError(f"data file {p} has suffix {p.suffix!r}; expected .csv (header row of "
                        "column names), .npz (arrays by name) or .h5/.hdf5 (datasets by name)")
    if not p.is_file():
        raise DataError(f"data file {p} does not exist; check data.path (relative paths are "
                        "relative to the configuration file)")
    if suffix in HDF5_SUFFIXES:
        cols = _read_hdf5(p, wanted)
    else:
        cols = _read_csv(p) if suffix == ".csv" else _read_npz(p)
    lengths = {name: arr.shape[0] for name, arr in cols.items()}
    if len(set(lengths.values())) > 1:
        raise DataError(f"data file {p}: columns have different lengths {lengths}; expected "
                        "one row per case in every array")
    if not cols or next(iter(lengths.values())) == 0:
        raise DataError(f"data file {p} has no cases; expected at least one row of numbers")
    return cols


def _read_csv(p: pathlib.Path) -> dict[str, np.ndarray]:
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:   # a BOM is not a name
            rows = [r for r in csv.reader(fh)
                    if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read data file {p} as CSV text: {err}; expected a UTF-8 "
                        "CSV file with a header row") from None
    if not rows:
        raise DataError(f"data file {p} is empty; expected a header row of column names, then "
                        "one row of numbers per case")
    header = [h.strip() for h in rows[0]]
    if any(_is_number(h) for h in header):
        raise DataError(f"data file {p}: the first row {rows[0][:6]} holds numbers; expected a "
                        "header row of column names (add one, e.g. x1,x2,y)")
    dup = sorted({h for h in header if header.count(h) > 1 or not h})
    if dup:
        raise DataError(f"data file {p}: column names {dup} are empty or repeated; give every "
                        "column its own name in the header row")
    values = np.empty((len(rows) - 1, len(header)))
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise DataError(f"data file {p}, data row {i + 1}: {len(row)} fields; expected "
                            f"{len(header)} (one per header column)")
        for j, cell in enumerate(row):
            try:
                values[i, j] = float(cell)
            except ValueError:
                raise DataError(f"data file {p}, data row {i + 1}, column {header[j]!r}: "
                                f"{cell!r} is not a number; expected numbers only below the "
                                "header") from None
    return {h: values[:, j].copy() for j, h in enumerate(header)}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_npz(p: pathlib.Path) -> dict[str, np.ndarray]:
    try:
        with np.load(p, allow_pickle=False) as npz:
            raw = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"cannot read data file {p} as NPZ: {err}; expected a file written by "
                        "numpy.savez with numeric arrays") from None
    return {name: _numeric(p, "array", name, arr) for name, arr in raw.items()}


def _numeric(p: pathlib.Path, kind: str, name: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind not in "biuf":
        raise DataError(f"data file {p}: {kind} {name!r} has dtype {arr.dtype}; expected "
                        "numbers (convert it with .astype(float))")
    if arr.ndim not in (1, 2):
        raise DataError(f"data file {p}: {kind} {name!r} has shape {arr.shape}; expected "
                        "(n,) or (n, k), one row per case")
    return np.asarray(arr, dtype=np.float64)


def _read_hdf5(p: pathlib.Path, wanted: Mapping[str, str] | None) -> dict[str, np.ndarray]:
    import h5py

    try:
        fh = h5py.File(p, "r")
    except OSError as err:
        raise DataError(f"cannot read data file {p} as HDF5: {err}; expected an HDF5 file "
                        "with one dataset per array (written e.g. by h5py)") from None
    with fh:
        found: list[str] = []
        fh.visititems(lambda n, obj: found.append(n) if isinstance(obj, h5py.Dataset) else None)
        cols: dict[str, np.ndarray] = {}
        for name, key in (wanted.items() if wanted is not None else ((n, "") for n in found)):
            obj = fh.get(name)
            if not isinstance(obj, h5py.Dataset):
                what = "is a group, not a dataset" if obj is not None else "does not exist"
                raise DataError(f"data file {p}: HDF5 dataset {name!r} (from {key}) {what}; "
                                f"the file has datasets {found}; name yours in {key}")
            try:
                arr = np.asarray(obj[()])
            except (OSError, TypeError, ValueError) as err:
                raise DataError(f"cannot read HDF5 dataset {name!r} of data file {p}: {err}; "
                                "expected a numeric dataset") from None
            cols[name] = _numeric(p, "HDF5 dataset", name, arr)
    return cols


def _hdf5_wanted(inputs: Sequence[str], outputs: Sequence[str],
                 split_column: str) -> dict[str, str]:
    """The datasets behind the named columns (``"x[1]"`` is column 1 of dataset ``x``)."""
    out: dict[str, str] = {}
    for key, names in (("data.inputs", inputs), ("data.outputs", outputs),
                       ("data.split_column", [split_column] if split_column else [])):
        for name in names:
            base, _, rest = name.partition("[")
            out.setdefault(base if rest.endswith("]") and rest[:-1].isdigit() else name, key)
    return out


def select(cols: Mapping[str, np.ndarray], names: Sequence[str], what: str,
           path: Any) -> np.ndarray:
    """The columns ``names`` side by side as an (n, k) array."""
    parts = []
    for name in names:
        arr = _column(cols, name)
        if arr is None:
            raise DataError(f"data file {path}: no column {name!r} for data.{what}; the file "
                            f"has {sorted(cols)}")
        parts.append(arr.reshape(arr.shape[0], -1))
    out = np.ascontiguousarray(np.concatenate(parts, axis=1))
    bad = np.argwhere(~np.isfinite(out))
    if bad.size:
        r, c = (int(v) for v in bad[0])
        raise DataError(f"data file {path}: data.{what} has {len(bad)} non-finite value(s), "
                        f"the first {out[r, c]} in row {r + 1}; remove or fill those rows")
    return out


def _column(cols: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    if name in cols:
        return cols[name]
    base, _, rest = name.partition("[")
    if rest.endswith("]") and base in cols and cols[base].ndim == 2 and rest[:-1].isdigit():
        k = int(rest[:-1])
        if k < cols[base].shape[1]:
            return cols[base][:, k]
    return None


def moments(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of every column of ``a`` (a constant column has sd 1).

    Computed on the columns divided by their largest magnitude and scaled back, so that values
    near the largest float (1e307) do not overflow in the sum or in the squares: an infinite
    sd would turn the whole column into zeros.
    """
    scale = np.max(np.abs(a), axis=0) if len(a) else np.ones(a.shape[1:])
    scale = np.where(scale > 0, scale, 1.0)
    b = a / scale
    s = b.std(axis=0) * scale
    return b.mean(axis=0) * scale, np.where(s > 0, s, 1.0)


def standardisation(x: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Mean and standard deviation of every training column (a constant column keeps sd 1)."""
    (x_mean, x_std), (y_mean, y_std) = moments(x), moments(y)
    return {"x_mean": x_mean.tolist(), "x_std": x_std.tolist(),
            "y_mean": y_mean.tolist(), "y_std": y_std.tolist()}


def _check_standardised(p: pathlib.Path, names: Sequence[str], raw: np.ndarray,
                        scaled: np.ndarray) -> None:
    """Refuse a column that standardising turned non-finite or into a constant it was not."""
    for k, name in enumerate(names):
        col, was = scaled[:, k], raw[:, k]
        with np.errstate(over="ignore"):
            collapsed = np.ptp(was) > 0 and np.ptp(col) == 0
        if collapsed or not np.all(np.isfinite(col)):
            raise DataError(f"data file {p}: column {name!r} (values up to "
                            f"{np.max(np.abs(was)):.3g}) cannot be standardised: its values "
                            "overflow the float range when centred and scaled; expected "
                            "magnitudes well below 1e308; rescale the column in the file, or "
                            "set data.standardise = false")


def to_original_units(dataset: Dataset, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Network outputs ``f`` and the targets of ``dataset`` in the data file's units (both
    unchanged unless the data were standardised)."""
    st = dataset.provenance.get("standardisation")
    f = np.asarray(f, dtype=np.float64)
    if not st:
        return f, dataset.y
    mean, std = np.asarray(st["y_mean"]), np.asarray(st["y_std"])
    return f * std + mean, dataset.y * std + mean


def _dataset(name: str, x: np.ndarray, y: np.ndarray, rows: np.ndarray, prov: dict[str, Any],
             st: Mapping[str, list[float]] | None) -> Dataset:
    if st:
        with np.errstate(over="ignore", invalid="ignore"):   # checked by _check_standardised
            x = (x - np.asarray(st["x_mean"])) / np.asarray(st["x_std"])
            y = (y - np.asarray(st["y_mean"])) / np.asarray(st["y_std"])
        prov = {**prov, "standardisation": dict(st)}
    return Dataset(name, x, y, rows, prov)


def _test_cases(p: pathlib.Path, cols: Mapping[str, np.ndarray], n: int, split_column: str,
                test_fraction: float, seed: int) -> tuple[np.ndarray, str]:
    """Which of the file's ``n`` cases are test cases (``split_column``'s 1s, else
    ``round(test_fraction * n)`` drawn from ``seed``), and how they were chosen."""
    if split_column:
        flag = select(cols, [split_column], "split_column", p)[:, 0]
        if not np.all((flag == 0) | (flag == 1)):
            raise DataError(f"data file {p}: split column {split_column!r} holds "
                            f"{sorted(set(flag.tolist()))[:5]}; expected 0 (training) or 1 "
                            "(test) in every row")
        is_test = flag == 1
        split_how = f"column {split_column!r}"
    else:
        n_test = round(test_fraction * n)
        if not 0 < n_test < n:
            raise DataError(f"data file {p}: data.test_fraction = {test_fraction} of {n} "
                            f"cases leaves {n_test} test and {n - n_test} training cases; "
                            "expected at least one of each (or give data.test_path)")
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=SPLIT_SPAWN_KEY))
        is_test = np.zeros(n, dtype=bool)
        is_test[rng.choice(n, size=n_test, replace=False)] = True
        split_how = f"{n_test} of {n} cases drawn from seed {seed}"
    return is_test, split_how


def load_file_split(path: str | pathlib.Path, *, outputs: Sequence[str],
                    inputs: Sequence[str] = (), test_path: str | pathlib.Path = "",
                    split_column: str = "", test_fraction: float = 0.2,
                    standardise: bool = False, seed: int = 0,
                    sha256: str = "") -> DataSplit:
    """A training and a test set from a user's file (see the module docstring).

    ``inputs`` empty: every column that is not an output (nor the split column); for an HDF5
    file, empty ``inputs`` and ``outputs`` mean the datasets ``inputs`` and ``targets``. The
    test set comes from ``test_path`` (same columns), else from ``split_column`` (0 = training, 1 =
    test), else ``round(test_fraction * n)`` cases drawn without replacement from ``seed``.
    With ``standardise`` every input and output is shifted and scaled by the training set's
    mean and standard deviation; the constants are in each Dataset's provenance
    (``standardisation``) and :func:`to_original_units` undoes them. ``sha256``, if given, must
    match the file (a run records it, so a changed file is refused rather than silently used).
    """
    p = pathlib.Path(path)
    digest = file_sha256(p)
    wanted = None
    if p.suffix.lower() in HDF5_SUFFIXES:
        outputs = list(outputs) or list(HDF5_DEFAULT_OUTPUTS)
        inputs = list(inputs) or list(HDF5_DEFAULT_INPUTS)
        wanted = _hdf5_wanted(inputs, outputs, split_column)
    if sha256 and sha256 != digest:
        raise DataError(f"data file {p} has changed since the run recorded it (SHA-256 "
                        f"{digest[:12]}..., recorded {sha256[:12]}...); restore the original "
                        "file, or start a new run on the new one")
    if not outputs:
        raise DataError(f"data.outputs is empty for data file {p}; name the target column(s), "
                        'e.g. outputs = ["y"]')
    cols = read_columns(p, wanted)
    skip = set(outputs) | ({split_column} if split_column else set())
    ins = list(inputs) or [c for c in cols if c not in skip]
    both = sorted(set(ins) & set(outputs))
    if both:
        raise DataError(f"data file {p}: columns {both} are both inputs and outputs; list each "
                        "column in one of data.inputs and data.outputs")
    if not ins:
        raise DataError(f"data file {p} has no input columns besides the outputs {list(outputs)}"
                        "; add input columns or list them in data.inputs")
    x, y = select(cols, ins, "inputs", p), select(cols, list(outputs), "outputs", p)
    prov: dict[str, Any] = {"source": "file", "path": str(p.resolve()), "sha256": digest,
                            "inputs": ins, "outputs": list(outputs)}
    if test_path:
        tp = pathlib.Path(test_path)
        tcols = read_columns(tp, _hdf5_wanted(ins, outputs, "")
                             if tp.suffix.lower() in HDF5_SUFFIXES else None)
        x_te, y_te = select(tcols, ins, "inputs", tp), select(tcols, list(outputs), "outputs", tp)
        prov_te = {**prov, "path": str(tp.resolve()), "sha256": file_sha256(tp)}
        tr_rows, te_rows = np.arange(len(x)), np.arange(len(x_te))
        split_how = f"test file {tp}"
    else:
        is_test, split_how = _test_cases(p, cols, len(x), split_column, test_fraction, seed)
        tr_rows, te_rows = np.flatnonzero(~is_test), np.flatnonzero(is_test)
        if not (tr_rows.size and te_rows.size):
            raise DataError(f"data file {p}: the split ({split_how}) leaves {tr_rows.size} "
                            f"training and {te_rows.size} test cases; expected both non-empty")
        x, x_te, y, y_te = x[tr_rows], x[te_rows], y[tr_rows], y[te_rows]
        prov_te = prov
    st = standardisation(x, y) if standardise else None
    name = p.stem
    train = _dataset(name, x, y, tr_rows, {**prov, "role": "train", "split": split_how}, st)
    test = _dataset(f"{name}-test", x_te, y_te, te_rows,
                    {**prov_te, "role": "test", "split": split_how}, st)
    if st:
        for raw, ds in ((x, train), (x_te, test)):
            _check_standardised(p, ins, raw, ds.x)
        for raw, ds in ((y, train), (y_te, test)):
            _check_standardised(p, list(outputs), raw, ds.y)
    return DataSplit(train, test, "official")


def load_configured(data: Mapping[str, Any], seed: int = 0,
                    mnist_dir: Any = None) -> DataSplit:
    """The data of a resolved ``[data]`` section: a user's file when ``path`` is set, else the
    named set (:func:`thermonet.data.load_data`)."""
    from thermonet.data._datasets import load_data

    if not data.get("path"):
        return load_data(data["name"], test=data.get("test", "auto"), mnist_dir=mnist_dir)
    return load_file_split(data["path"], outputs=data.get("outputs", ()),
                           inputs=data.get("inputs", ()), test_path=data.get("test_path", ""),
                           split_column=data.get("split_column", ""),
                           test_fraction=data.get("test_fraction", 0.2),
                           standardise=data.get("standardise", False), seed=seed,
                           sha256=data.get("sha256", ""))
