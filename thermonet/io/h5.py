"""The header of every HDF5 file thermonet writes, and its check when a file is opened.

Every file carries, as root attributes, ``format`` (e.g. ``thermonet.checkpoint``),
``format_version`` (an integer, bumped when the layout changes incompatibly) and
``thermonet_version`` (of the writer). Files with a run id also carry ``run_uuid``.
:func:`open_h5` refuses a missing, unreadable, foreign or too-new file with a one-line error
that says what was found and what was expected.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thermonet import __version__
from thermonet.errors import CheckpointFormatError


def write_header(fh: Any, fmt: str, version: int, **attrs: Any) -> None:
    """Write the standard header (``format``, ``format_version``, ``thermonet_version``) and
    any further root attributes to the open HDF5 file ``fh``."""
    fh.attrs["format"] = fmt
    fh.attrs["format_version"] = version
    fh.attrs["thermonet_version"] = __version__
    for key, value in attrs.items():
        fh.attrs[key] = value


def open_h5(path: str | Path, fmt: str, versions: Iterable[int] | None = None, *,
            what: str = "file", error: type[Exception] = CheckpointFormatError,
            missing_hint: str = "", missing_what: str = "",
            missing_error: type[Exception] | None = None, damaged_hint: str = "") -> Any:
    """Open ``path`` read-only after checking its header; returns the open ``h5py.File``.

    Parameters
    ----------
    fmt : str
        The expected ``format`` attribute.
    versions : iterable of int, optional
        The readable ``format_version`` values (None: any; files without the attribute count
        as version 1).
    what : str
        What the file is, for messages ("thermonet checkpoint").
    error : exception class
        Raised for every refusal (default :class:`~thermonet.errors.CheckpointFormatError`).
    missing_hint : str
        Appended to the message for a missing file (e.g. how to make one).
    missing_what, missing_error : optional
        The name and exception class for a missing file (default: ``what`` and ``error``).
    damaged_hint : str
        Appended to the message for a file that is not readable HDF5 (how to recover).
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise (missing_error or error)(f"no {missing_what or what} at {path}"
                                       + (f"; {missing_hint}" if missing_hint else ""))
    try:
        fh = h5py.File(path, "r")
    except OSError as err:
        raise error(f"{path} is not a readable HDF5 file ({err}); it may be truncated or "
                    "corrupt" + (f"; {damaged_hint}" if damaged_hint else "")) from None
    found = fh.attrs.get("format")
    if found != fmt:
        fh.close()
        raise error(f"{path} is not a {what} (format {found!r}; expected {fmt!r})")
    if versions is not None:
        allowed = sorted(versions)
        version = int(fh.attrs.get("format_version", 1))
        if version not in allowed:
            fh.close()
            raise error(f"{path} has {what} format version {version}; this thermonet "
                        f"({__version__}) reads version{'s' if len(allowed) > 1 else ''} "
                        f"{', '.join(map(str, allowed))}")
    return fh
