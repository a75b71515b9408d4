"""Reading parameter vectors from files.

Accepted formats (chosen by extension, then by content):

* ``.npy``: a 1-D array, or 2-D with ``index`` choosing the row (mapped, so that only the
  row is read from a file of many vectors).
* ``.json`` / ``.txt``: a JSON object with key ``"x"`` holding the flat vector, as the paper's
  code saved its walkers and ``localmin_*.txt`` files (Baldock & Marzari's released code), on
  one line or pretty-printed over many; or a bare JSON list of numbers. A walker file whose
  lines carry a leading label (``config {...}``) is accepted too; the first line is used (and,
  in a file too large to hold one vector, the only one read).
* ``.h5`` / ``.hdf5``: a thermonet HDF5 file. The vector is read from the first dataset found
  among ``state/theta``, ``theta``, ``x``; a 2-D dataset (replicas x parameters) needs
  ``index``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.api import as_theta
from thermonet.errors import ParameterFileError
from thermonet.io.digest import DATASET_ATTR, array_digest
from thermonet.types import FloatArray

HDF5_KEYS = ("state/theta", "theta", "x")


def _pick_row(arr: np.ndarray, index: int | None, path: Path, n_params: int) -> np.ndarray:
    if arr.ndim == 2:
        if index is None:
            raise ParameterFileError(
                f"{path} holds {arr.shape[0]} parameter vectors (shape {arr.shape}); choose one "
                f"with --index 0..{arr.shape[0] - 1} on the command line, or with [init] "
                f"params_index = 0..{arr.shape[0] - 1} in a run config")
        if not -arr.shape[0] <= index < arr.shape[0]:
            raise ParameterFileError(f"--index {index} is out of range for {path}, which holds "
                                     f"{arr.shape[0]} vectors")
        return arr[index]
    if index not in (None, 0):
        raise ParameterFileError(f"{path} holds a single vector; --index {index} is not valid")
    return arr


def load_params(path: str | Path, n_params: int, *, index: int | None = None) -> FloatArray:
    """Read a flat float64 parameter vector of length ``n_params`` from ``path``.

    Raises
    ------
    ParameterFileError
        One line naming the file, what was found and what was expected.
    """
    path = Path(path)
    if not path.is_file():
        raise ParameterFileError(f"parameter file {path} does not exist")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            # mapped, not read: a file of many vectors (or a wrong one) may be a gigabyte, and
            # only its header and one row are needed
            arr = np.load(path, mmap_mode="r", allow_pickle=False) if path.stat().st_size \
                else np.load(path, allow_pickle=False)
        elif suffix in (".h5", ".hdf5"):
            arr = _read_hdf5(path)
        else:
            arr = _read_json(path, n_params)
    except ParameterFileError:
        raise
    except Exception as err:
        raise ParameterFileError(
            f"cannot read {path} ({type(err).__name__}: {err}); expected a .npy array, a JSON "
            "object with key \"x\", or a thermonet HDF5 file") from None
    arr = np.asarray(arr)
    if np.iscomplexobj(arr):
        raise ParameterFileError(f"{path} holds complex numbers (dtype {arr.dtype}); expected "
                                 "real parameters: save the real part (np.real) if that is "
                                 "what you meant")
    if arr.dtype.kind not in "fiu":
        raise ParameterFileError(f"{path} holds values of dtype {arr.dtype}; expected "
                                 f"{n_params} real numbers")
    if arr.ndim not in (1, 2):
        raise ParameterFileError(f"{path} holds an array of shape {arr.shape}; expected a flat "
                                 f"vector of {n_params} values")
    arr = _pick_row(arr, index, path, n_params)
    if arr.shape[0] != n_params:
        raise ParameterFileError(f"{path} holds {arr.shape[0]} parameters; expected {n_params} "
                                 "for this architecture (check --arch)")
    return as_theta(np.array(arr), n_params, what=str(path))     # a copy, not the mapping


#: a JSON or text parameter file larger than this many bytes per parameter (plus a margin) holds
#: more than one vector: only its first line is read
_JSON_BYTES_PER_PARAM = 64
_JSON_MARGIN = 1 << 20


def _read_json(path: Path, n_params: int) -> Any:
    size = path.stat().st_size
    try:
        if size > _JSON_BYTES_PER_PARAM * n_params + _JSON_MARGIN:
            return _read_first_line(path, size, n_params)
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ParameterFileError(f"{path} is not UTF-8 text; expected a JSON object with key "
                                 "\"x\", a .npy array or a thermonet HDF5 file (check the "
                                 "file and its extension)") from None
    stripped = text.strip()
    if not stripped:
        raise ParameterFileError(f"{path} is empty; expected a JSON object with key \"x\"")
    if stripped[0] in "{[":
        # the whole file: a pretty-printed object, or a bare list
        try:
            return _from_json(path, json.loads(stripped))
        except json.JSONDecodeError:
            pass   # e.g. several walker objects, one per line: the first line is used
    line = stripped.splitlines()[0].strip()
    if not line.startswith(("{", "[")):
        # a walker line "<label> {json}" as written by the paper's code
        _, _, line = line.partition(" ")
        line = line.strip()
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ParameterFileError(f"{path} is not valid JSON ({err.msg} at column {err.colno}); "
                                 "expected an object with key \"x\" or a list of "
                                 "numbers") from None
    return _from_json(path, obj)


def _read_first_line(path: Path, size: int, n_params: int) -> Any:
    """The vector on the first line of a file too large to hold one vector alone (a walker
    file of many lines), read without reading the rest."""
    limit = _JSON_BYTES_PER_PARAM * n_params + _JSON_MARGIN
    with open(path, encoding="utf-8") as fh:
        line = fh.readline(limit + 1).strip()
    if len(line) > limit or not line:
        raise ParameterFileError(
            f"{path} is {size:,} bytes and its first line is {'empty' if not line else 'longer'}"
            f"{'' if not line else f' than {limit:,} bytes'}: more than one vector of "
            f"{n_params} numbers in JSON; expected one vector (or one walker per line); save "
            "large or many vectors as .npy and choose one with --index")
    if not line.startswith(("{", "[")):
        _, _, line = line.partition(" ")      # a walker line "<label> {json}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ParameterFileError(f"{path} ({size:,} bytes): its first line is not valid JSON "
                                 f"({err.msg} at column {err.colno}); expected a vector of "
                                 f"{n_params} numbers on it, e.g. {{\"x\": [...]}}") from None
    return _from_json(path, obj)


def _from_json(path: Path, obj: Any) -> Any:
    if isinstance(obj, list):
        try:
            return np.asarray(obj, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise ParameterFileError(f"{path} holds a JSON list that is not a list of numbers; "
                                     "expected the flat parameter vector") from None
    if not isinstance(obj, dict) or "x" not in obj:
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise ParameterFileError(f"{path} has no key \"x\" (found {keys}); expected the flat "
                                 "parameter vector under \"x\"")
    try:
        return np.asarray(obj["x"], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ParameterFileError(f"{path}: \"x\" is not a list of numbers") from None


def _read_hdf5(path: Path) -> Any:
    import h5py

    try:
        fh = h5py.File(path, "r")
    except OSError as err:
        raise ParameterFileError(f"{path} is not a readable HDF5 file ({err})") from None
    with fh:
        for key in HDF5_KEYS:
            if key in fh and isinstance(fh[key], h5py.Dataset):
                value = fh[key][()]
                expected = fh[key].attrs.get(DATASET_ATTR)
                # a thermonet checkpoint signs its datasets: a damaged one is refused here too
                if expected is not None and array_digest(value) != expected:
                    raise ParameterFileError(
                        f"{path}: dataset {key} fails its checksum (the file is damaged); "
                        "expected the parameters it was written with. Restore the file from "
                        "a backup, or take the parameters from another checkpoint")
                return value
    raise ParameterFileError(f"{path} has none of the datasets {', '.join(HDF5_KEYS)}; expected "
                             "a thermonet HDF5 file holding a parameter vector")


def save_params(path: str | Path, theta: FloatArray) -> Path:
    """Write ``theta`` as ``.npy``, or JSON ``{"x": [...]}`` for a ``.json`` path."""
    path = Path(path)
    theta = np.asarray(theta, dtype=np.float64)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps({"x": theta.tolist()}) + "\n", encoding="utf-8")
    else:
        np.save(path, theta)
    return path
