"""Where a command may write: the check of a path given on the command line, before any work.

Every command that writes a file or a directory the user names checks it here first, so that a
long computation is never lost to an unwritable path and no output ever replaces a file a
thermonet directory keeps: a run's checkpoint, configuration, log, lock, initialisation file and
trace segments; an evidence directory's configuration, minima, TI checkpoints and results; an
annealing's checkpoint and summary. A refused path changes nothing.

A directory is a thermonet directory when it holds one of the files only thermonet writes
(:data:`MARKERS`, or a ``config.toml`` that starts with the resolved configuration's header);
within it, the names in :data:`OWNED` and everything below the directories in
:data:`OWNED_DIRS` are its own. A user's other files beside a run (``--out .``) stay theirs.
"""

from __future__ import annotations

import os
from pathlib import Path

from thermonet.errors import ThermonetError
from thermonet.io.atomic import TEMP_SUFFIX
from thermonet.io.checkpoint import CHECKPOINT, CONFIG, LOG
from thermonet.io.initialisation import INITIALISATION
from thermonet.io.lock import LOCK_NAME
from thermonet.io.rundir import config_owner
from thermonet.io.trace import TRACE_DIR

#: files of the workflows above this layer (evidence, annealing), named here because ``io``
#: may not import them; tests/io/test_outputs.py checks that they match the workflows' constants
EVIDENCE_FILES = ("evidence.toml", "result.json", "ti_checkpoint.h5", "reference.npz",
                  "summary.json", "summary.h5", "table.txt")
EVIDENCE_DIRS = ("minima", "ti", "laplace")
ANNEAL_FILES = ("anneal.h5", "anneal.json")

#: files whose presence makes a directory thermonet's
MARKERS = (CHECKPOINT, INITIALISATION, LOCK_NAME, "evidence.toml", "ti_checkpoint.h5",
           "anneal.h5")
#: the files a thermonet directory keeps
OWNED = (CHECKPOINT, CONFIG, LOG, LOCK_NAME, INITIALISATION, *EVIDENCE_FILES, *ANNEAL_FILES)
#: the directories whose whole contents a thermonet directory keeps
OWNED_DIRS = (TRACE_DIR, *EVIDENCE_DIRS)


class OutputPathError(ThermonetError):
    """An output path cannot be written (missing or unwritable directory, below a file, or a
    file a thermonet directory keeps)."""


def is_thermonet_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a run, an evidence computation or an annealing."""
    try:
        return (any((directory / name).exists() for name in MARKERS)
                or (directory / TRACE_DIR).is_dir()
                or config_owner(directory / CONFIG) == "thermonet")
    except OSError:      # a directory we may not look into: its files are not ours to judge
        return False


def owner_of(path: str | Path) -> Path | None:
    """The thermonet directory that keeps ``path`` (a file or directory, existing or not), or
    None if no thermonet directory does.

    ``path``'s directory is resolved (symbolic links, ``..``), ``path``'s own name is not: a
    write replaces a link, never the file it points to.
    """
    path = Path(path)
    parent = Path(os.path.realpath(path.parent if str(path.parent) else "."))
    parts = [path.name]
    directory = parent
    while True:
        name = parts[-1]
        base = name[:-len(TEMP_SUFFIX)] if name.endswith(TEMP_SUFFIX) else name
        owned = base in OWNED_DIRS or (len(parts) == 1 and base in OWNED)
        if owned and is_thermonet_dir(directory):
            return directory
        if directory == directory.parent:
            return None
        parts.append(directory.name)
        directory = directory.parent


def refuse_owned(path: str | Path, *, option: str = "--out") -> None:
    """Raise :class:`OutputPathError` if ``path`` is a file or directory a thermonet directory
    keeps (see the module docstring)."""
    path = Path(path)
    owner = owner_of(path)
    if owner is None:
        return
    suffix = "".join(Path(path.name).suffixes) or ".out"
    raise OutputPathError(
        f"{option} {path} names a file that the thermonet directory {owner} keeps (its "
        "checkpoint, configuration, log, lock, trace or results); expected a path outside "
        f"them, since writing there would destroy the run; choose another {option}, e.g. "
        f"{option} {path.parent / ('output' + suffix)}")


def check_output(path: str | Path, *, option: str = "--out") -> Path:
    """Check that the file ``path`` can be written, before any work that produces it.

    Refuses a path that is a directory, lies below a regular file, whose directory is missing
    or not writable, or that a thermonet directory keeps (:func:`refuse_owned`), with a
    one-line :class:`OutputPathError` naming ``option``.

    Parameters
    ----------
    path : path
        The file to be written.
    option : str
        The command-line option that named it, for the message.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{option} {path} is a directory; expected a file name, e.g. "
                              f"{option} {path / 'out'}")
    refuse_owned(path, option=option)
    _check_directory(path.parent, f"{option} {path}", option)
    return path


def check_output_dir(path: str | Path, *, option: str = "--out") -> Path:
    """Check that the directory ``path`` exists and is writable, or can be created.

    Refuses a path that is a regular file or lies below one, a directory (or its nearest
    existing ancestor, if it must be created) that is not writable, and a directory that a
    thermonet directory keeps (a run's ``trace/``).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is a file; expected a directory; choose "
                              f"another {option}")
    refuse_owned(path, option=option)
    _check_directory(path, f"{option} {path}", option, create=True)
    return path


def _check_directory(directory: Path, what: str, option: str, create: bool = False) -> None:
    directory = directory if str(directory) else Path(".")
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputPathError(f"cannot write {what}: {existing} is a file, not a directory; "
                              f"choose another {option}")
    if existing != directory and not create:
        raise OutputPathError(f"cannot write {what}: directory {directory} does not exist; "
                              f"expected an existing directory; create it (mkdir -p "
                              f"{directory}) or choose another {option}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {what}: directory {existing} is not writable; "
                              f"expected a directory you may write to; choose another {option}")


__all__ = ["ANNEAL_FILES", "EVIDENCE_DIRS", "EVIDENCE_FILES", "MARKERS", "OWNED", "OWNED_DIRS",
           "OutputPathError", "check_output", "check_output_dir", "is_thermonet_dir",
           "owner_of", "refuse_owned"]
