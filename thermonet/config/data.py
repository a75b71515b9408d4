"""The ``[data]`` section of a run configuration: a named set, or a user's regression file
(``path``) with its columns, split and standardisation (docs/regression.md).

A file is read and checked once, when the configuration is resolved; its SHA-256 is recorded
in the resolved configuration (``data.sha256``), so a resumed or analysed run refuses a file
whose bytes changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thermonet.errors import ConfigError

DATA_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "name": ("D50", (str,), (lambda v: bool(v), "a data set name such as D500"),
             "training set"),
    "test": ("auto", (str,), (lambda v: v in ("auto", "complement", "official"),
                              "one of auto, complement, official"), "test set"),
    "path": ("", (str,), None,
             ("a user's regression data file (.csv with a header row, .npz, or .h5/.hdf5 "
              "with one dataset per array); relative to the configuration file. Empty: the "
              "named set")),
    "inputs": ([], (list,), (lambda v: all(isinstance(c, str) for c in v),
                             "a list of column names"),
               ("input columns of data.path (empty: every column but the outputs; for an HDF5 "
                "file the dataset inputs)")),
    "outputs": ([], (list,), (lambda v: all(isinstance(c, str) for c in v),
                              "a list of column names"),
                "target columns of data.path (empty for an HDF5 file: the dataset targets)"),
    "test_path": ("", (str,), None,
                  "a second file with the same columns: the test set (relative as data.path)"),
    "split_column": ("", (str,), None,
                     "a column of data.path marking each case 0 (training) or 1 (test)"),
    "test_fraction": (0.2, (float, int), (lambda v: 0 < v < 1, "a fraction in (0, 1)"),
                      ("without test_path or split_column: this fraction of the cases, drawn "
                       "from run.seed, is the test set")),
    "standardise": (False, (bool,), None,
                    ("shift and scale inputs and outputs by the training set's mean and "
                     "standard deviation (errors are still reported in the file's units)")),
    "sha256": ("", (str,), None,
               ("checksum of data.path, recorded when a run starts; a changed file is "
                "refused")),
}
#: [data] keys that only mean something with data.path
FILE_DATA_KEYS = ("inputs", "outputs", "test_path", "split_column", "test_fraction",
                  "standardise", "sha256")


def resolve_data_file(data: dict[str, Any], sources: dict[str, str],
                      seed: int) -> dict[str, int]:
    """Check a user's data file once, here: its columns, split and checksum (recorded in the
    resolved configuration, so a resumed or analysed run reads the same bytes). Returns the
    widths it read, ``{"n_inputs", "n_outputs"}`` (empty without a file)."""
    if not data["path"]:
        given = [k for k in FILE_DATA_KEYS if data[k] != DATA_KEYS[k][0]]
        if given:
            raise ConfigError(f"data.{given[0]} is set but data.path is not; give the data "
                              "file in data.path, or remove the key")
        return {}
    from thermonet.data import load_configured
    from thermonet.errors import DataError

    if sources.get("data.name") == "default":
        data["name"] = "file"
    elif data["name"] != "file":     # "file" is what a resolved configuration records
        raise ConfigError(
            f"data.name = {data['name']!r} ({_origin(sources, 'data.name')}) and data.path = "
            f"{data['path']!r} both name the training data; expected one of them; remove "
            "data.name to train on the file, or clear data.path (--set data.path=\"\") to "
            f"train on {data['name']}")
    if data["test"] != "auto":
        raise ConfigError("data.test is for the named sets, not for data.path; split a file "
                          "with data.test_path, data.split_column or data.test_fraction")
    if data["test_path"] and data["split_column"]:
        raise ConfigError("data.test_path and data.split_column both give the test set; "
                          "keep one")
    given = data["sha256"]
    # a checksum a run recorded (its config.toml) is checked as the file is read; one given
    # by hand is compared here, and said to be the user's, not a run's
    by_hand = bool(given) and sources.get("data.sha256") in ("set", "commandline")
    try:
        split = load_configured({**data, "sha256": ""} if by_hand else data, seed)
    except DataError as err:
        raise ConfigError(f"[data] {err}") from None
    found = str(split.train.provenance["sha256"])
    if by_hand and given != found:
        raise ConfigError(
            f"data.sha256 = {given[:12]}... ({_origin(sources, 'data.sha256')}) does not match "
            f"data file {data['path']} (SHA-256 {found[:12]}...); expected the file's own "
            "checksum, which a run records by itself; drop the --set data.sha256, or check "
            "that data.path names the file you meant")
    data["sha256"] = found
    for key in ("inputs", "outputs"):      # the columns read, also when defaulted
        if not data[key]:
            data[key] = list(split.train.provenance[key])
    return {"n_inputs": int(split.train.x.shape[1]), "n_outputs": int(split.train.y.shape[1])}


def widths_from_data(name: str, defaults: Mapping[str, Any], given: Mapping[str, Any],
                     data: Mapping[str, Any], widths: Mapping[str, int]) -> dict[str, Any]:
    """``given`` (an ``[architecture]`` table) with ``n_inputs`` and ``n_outputs``, where the
    architecture takes them, set from the ``widths`` of the data file that
    :func:`resolve_data_file` read; a value given that disagrees is a ConfigError."""
    out = dict(given)
    for key, cols in (("n_inputs", "inputs"), ("n_outputs", "outputs")):
        if key not in defaults or key not in widths:
            continue
        n = widths[key]
        if key not in given:
            out[key] = n
        elif given[key] != n:
            raise ConfigError(
                f"[architecture] {name}: {key} = {given[key]!r}, but data file "
                f"{data['path']} gives {n} {cols[:-1]}{'s' if n != 1 else ''} (data.{cols} = "
                f"{list(data[cols])}); expected the two to agree; remove {key} (it is taken "
                f"from the file) or choose the columns with data.{cols}")
    return out


def _origin(sources: dict[str, str], key: str) -> str:
    return {"set": "from --set", "commandline": "from the command line"}.get(
        sources.get(key, ""), "from the configuration file")


def absolute_data_paths(raw: dict[str, Any], config_dir: Path,
                        overrides: dict[str, Any]) -> None:
    """Make data.path and data.test_path absolute: from the file, relative to its directory;
    from ``--set``, relative to the working directory (the resolved configuration a run
    stores then works from anywhere)."""
    data = raw.get("data")
    for key in ("path", "test_path"):
        if isinstance(data, dict) and isinstance(data.get(key), str) and data[key]:
            data[key] = str((config_dir / Path(data[key]).expanduser()).resolve())
        value = overrides.get(f"data.{key}")
        if isinstance(value, str) and value:
            overrides[f"data.{key}"] = str(Path(value).expanduser().resolve())
