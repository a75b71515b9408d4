"""The four original MNIST IDX files: where they are, whether they are intact, what they hold.

Nothing here downloads (see :mod:`thermonet.data._fetch`) or preprocesses beyond the Pillow
resize of :func:`mnist16`.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import math
import os
import pathlib
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple, Union

import numpy as np

from thermonet.errors import DataError

logger = logging.getLogger("thermonet.data")

PathLike = Union[str, "os.PathLike[str]"]

MNIST_ENV = "THERMONET_MNIST_DIR"
DATA_ENV = "THERMONET_DATA_DIR"
DEFAULT_DATA_DIR = "~/.local/share/thermonet"

FETCH_HINT = f"run `thermonet data fetch` or set {MNIST_ENV} to a directory holding them"


class MnistNotFoundError(DataError):
    """One or more of the four MNIST files is absent (as opposed to present but corrupt)."""


@dataclass(frozen=True)
class MnistFile:
    """One of the four original MNIST IDX files."""

    key: str            # "train-images", "train-labels", "t10k-images", "t10k-labels"
    filename: str       # name without ".gz"
    sha256: str         # of the uncompressed bytes
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Size of the uncompressed file (uint8 payload plus header)."""
        return 4 + 4 * len(self.shape) + int(np.prod(self.shape))


MNIST_FILES: dict[str, MnistFile] = {
    f.key: f
    for f in (
        MnistFile("train-images", "train-images-idx3-ubyte",
                  "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                  (60000, 28, 28)),
        MnistFile("train-labels", "train-labels-idx1-ubyte",
                  "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                  (60000,)),
        MnistFile("t10k-images", "t10k-images-idx3-ubyte",
                  "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                  (10000, 28, 28)),
        MnistFile("t10k-labels", "t10k-labels-idx1-ubyte",
                  "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
                  (10000,)),
    )
}

N_TRAIN = 60000
N_TEST = 10000

# IDX type codes (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"); all big-endian.
_IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


# ---------------------------------------------------------------------------------------------
# directories

def data_dir_path(data_dir: PathLike | None = None) -> pathlib.Path:
    """The user data directory: ``data_dir``, else ``$THERMONET_DATA_DIR``, else the default.

    The default is ``~/.local/share/thermonet``. The directory is not created here.
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR
    return pathlib.Path(data_dir).expanduser()


def mnist_dir_path(mnist_dir: PathLike | None = None,
                   data_dir: PathLike | None = None) -> tuple[pathlib.Path, str]:
    """Where to look for MNIST, and why there.

    Returns ``(directory, source)`` with ``source`` one of ``"argument"``, ``"THERMONET_MNIST_DIR"``
    or ``"default"`` (``<data dir>/mnist``, where ``thermonet data fetch`` puts the files).
    """
    if mnist_dir is not None:
        return pathlib.Path(mnist_dir).expanduser(), "argument"
    env = os.environ.get(MNIST_ENV)
    if env:
        return pathlib.Path(env).expanduser(), MNIST_ENV
    return data_dir_path(data_dir) / "mnist", "default"


# ---------------------------------------------------------------------------------------------
# reading

def _fmt_bytes(n: int) -> str:
    return f"{n:,} bytes"


def read_bytes(path: PathLike) -> bytes:
    """The uncompressed contents of an IDX file, raw or gzip (detected from the content).

    Raises
    ------
    DataError
        The file cannot be read, or it is named ``*.gz`` but is not a gzip stream, or its gzip
        stream is corrupt or truncated.
    """
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MnistNotFoundError(f"{path} does not exist; {FETCH_HINT}") from None
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(
                f"{path.name}: bad gzip stream ({type(err).__name__}: {err}) in {path} "
                f"({_fmt_bytes(len(data))} compressed); the file is corrupt or incomplete: "
                f"delete it and {FETCH_HINT}") from None
    if path.suffix == ".gz":
        raise DataError(
            f"{path.name}: not a gzip file (it starts with {data[:2].hex() or 'nothing'}, "
            f"expected 1f8b) in {path}; delete it and {FETCH_HINT}")
    return data


def parse_idx(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of an IDX file into a native-endian array.

    Validates the magic number, the type code, the number of dimensions and that the payload
    length equals the one the header declares.
    """
    if len(data) < 4:
        raise DataError(f"{name}: not an IDX file: {len(data)} bytes, shorter than the 4-byte "
                        f"magic number; {FETCH_HINT}")
    zero0, zero1, code, ndim = data[0], data[1], data[2], data[3]
    if zero0 != 0 or zero1 != 0 or code not in _IDX_DTYPES or ndim == 0:
        raise DataError(
            f"{name}: wrong IDX magic number 0x{data[:4].hex()}; expected 0x0000TTNN with type "
            f"code TT in {{08,09,0b,0c,0d,0e}} and NN >= 1 dimensions (MNIST images: "
            f"0x00000803, labels: 0x00000801); this is not an IDX file: {FETCH_HINT}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{name}: truncated IDX header: {len(data)} bytes, the {ndim}-dimensional "
                        f"header needs {header}; {FETCH_HINT}")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    # exact integers: a corrupt header's dimensions overflow int64, and an empty dimension
    # beside huge ones matches an empty payload yet is no array numpy can make
    if math.prod(d for d in shape if d) * dtype.itemsize >= 2 ** 63:
        raise DataError(f"{name}: the IDX header declares shape {shape} of {dtype.name}, larger "
                        f"than any array; the file is corrupt: delete it and {FETCH_HINT}")
    expected = math.prod(shape) * dtype.itemsize
    got = len(data) - header
    if got != expected:
        what = "truncated" if got < expected else "oversized"
        raise DataError(
            f"{name}: {what} IDX file: the header declares shape {shape} of {dtype.name} = "
            f"{_fmt_bytes(expected)} of payload, but {_fmt_bytes(got)} follow the {header}-byte "
            f"header (file size {_fmt_bytes(len(data))}, "
            f"expected {_fmt_bytes(expected + header)}); "
            f"the file is incomplete or corrupt: delete it and {FETCH_HINT}")
    arr = np.frombuffer(data, dtype=dtype, count=expected // dtype.itemsize, offset=header)
    return arr.reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: PathLike) -> np.ndarray:
    """Read an IDX file (raw or gzip-compressed) into a native-endian numpy array.

    Parameters
    ----------
    path : str or path-like
        The file. Compression is detected from the content; a file named ``*.gz`` must be gzip.

    Returns
    -------
    ndarray
        Shape and dtype from the header (MNIST: uint8, (n, 28, 28) images or (n,) labels).

    Raises
    ------
    DataError
        Missing or unreadable file, bad gzip stream, wrong magic number, unknown type code, or a
        payload whose length does not match the header (the message gives both byte counts).
    """
    path = pathlib.Path(path)
    return parse_idx(read_bytes(path), path.name)


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


# (resolved path, size, mtime_ns, inode) -> (SHA-256, uncompressed length)
_SHA_MEMO: dict[tuple[str, int, int, int], tuple[str, int]] = {}


def _stat_key(path: pathlib.Path) -> tuple[str, int, int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise MnistNotFoundError(f"{path} does not exist; {FETCH_HINT}") from None
    return str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino


def uncompressed_sha256(path: PathLike) -> tuple[str, int]:
    """SHA-256 (hex) and length of the uncompressed contents of a raw or gzip file.

    Memoised on the file's path, size, modification time and inode, so verifying the same
    files again is free.
    """
    p = pathlib.Path(path)
    key = _stat_key(p)
    if key not in _SHA_MEMO:
        data = read_bytes(p)
        _SHA_MEMO[key] = (sha256_hex(data), len(data))
    return _SHA_MEMO[key]


def _mismatch_message(spec: MnistFile, path: pathlib.Path, sha: str, size: int) -> str:
    return (f"{path.name}: checksum mismatch in {path.parent}: the uncompressed contents have "
            f"SHA-256 {sha[:16]}... ({_fmt_bytes(size)}) but the original {spec.filename} has "
            f"{spec.sha256[:16]}... ({_fmt_bytes(spec.nbytes)}); the file is corrupt, "
            f"incomplete or not the original MNIST: delete it and run "
            f"`thermonet data fetch --dest {path.parent}`")


def verify_file(spec: MnistFile, path: PathLike) -> None:
    """Raise :class:`DataError` unless ``path`` holds exactly the original ``spec`` file."""
    p = pathlib.Path(path)
    sha, size = uncompressed_sha256(p)
    if sha != spec.sha256:
        raise DataError(_mismatch_message(spec, p, sha, size))


def find_mnist(mnist_dir: PathLike | None = None, *, verify: bool = True,
               data_dir: PathLike | None = None) -> dict[str, pathlib.Path]:
    """Locate the four MNIST IDX files.

    The directory is ``mnist_dir`` if given, else ``$THERMONET_MNIST_DIR``, else
    ``<data dir>/mnist`` (where ``thermonet data fetch`` stores them). Each file may be raw
    (``train-images-idx3-ubyte``) or gzip-compressed (``train-images-idx3-ubyte.gz``); the raw
    one is preferred when both exist and are intact.

    Parameters
    ----------
    mnist_dir : path-like, optional
    verify : bool
        Check the SHA-256 of each file's uncompressed contents against the original MNIST
        (memoised per file size and modification time, so repeated calls are cheap).
    data_dir : path-like, optional
        Only for the default location.

    Returns
    -------
    dict
        ``{"train-images", "train-labels", "t10k-images", "t10k-labels"}`` -> path.

    Raises
    ------
    MnistNotFoundError
        (a :class:`DataError`) one or more files are absent; the message lists them.
    DataError
        A file is present but its checksum is wrong (only with ``verify=True``).
    """
    directory, source = mnist_dir_path(mnist_dir, data_dir)
    where = {"argument": "given", MNIST_ENV: f"from {MNIST_ENV}",
             "default": f"the default location; {MNIST_ENV} is not set"}[source]
    candidates: dict[str, list[pathlib.Path]] = {}
    missing: list[str] = []
    for key, spec in MNIST_FILES.items():
        candidates[key] = [p for p in (directory / spec.filename,
                                       directory / (spec.filename + ".gz")) if p.is_file()]
        if not candidates[key]:
            missing.append(spec.filename + "[.gz]")
    if missing:
        state = "does not exist" if not directory.is_dir() else "lacks " + ", ".join(missing)
        raise MnistNotFoundError(
            f"MNIST not found: {directory} ({where}) {state}; expected the four original IDX "
            f"files (raw or .gz); {FETCH_HINT}")
    found: dict[str, pathlib.Path] = {}
    for key, spec in MNIST_FILES.items():
        # with a raw file and a .gz both present, verify even when not asked, so that a
        # corrupt copy never shadows an intact one
        if not verify and len(candidates[key]) == 1:
            found[key] = candidates[key][0]
            continue
        error: DataError | None = None
        for cand in candidates[key]:
            try:
                verify_file(spec, cand)
            except DataError as err:
                error = error or err
            else:
                found[key] = cand
                break
        else:
            assert error is not None
            raise error
        if error is not None:
            logger.warning("%s; using the intact %s instead", error, found[key].name)
    return found


# ---------------------------------------------------------------------------------------------
# full MNIST, Pillow-resized

class Mnist16(NamedTuple):
    """Full MNIST after the Pillow resize, as uint8 (what every data set is built from)."""

    train16: np.ndarray       # uint8 (60000, 16, 16)
    train_labels: np.ndarray  # uint8 (60000,)
    test16: np.ndarray        # uint8 (10000, 16, 16)
    test_labels: np.ndarray   # uint8 (10000,)
    sha256: dict[str, str]    # file key -> SHA-256 of the uncompressed source
    files: dict[str, str]     # file key -> path


def read_verified(spec: MnistFile, path: PathLike) -> np.ndarray:
    """Read one MNIST file, check the SHA-256 of exactly the bytes parsed, and its shape."""
    p = pathlib.Path(path)
    key = _stat_key(p)
    data = read_bytes(p)
    sha = sha256_hex(data)
    _SHA_MEMO[key] = (sha, len(data))
    if sha != spec.sha256:
        raise DataError(_mismatch_message(spec, p, sha, len(data)))
    arr = parse_idx(data, p.name)
    if arr.shape != spec.shape or arr.dtype != np.uint8:  # pragma: no cover - implied by sha
        raise DataError(f"{p.name}: shape {arr.shape} {arr.dtype}, expected {spec.shape} uint8")
    return arr


_MNIST16: Mnist16 | None = None


def mnist16(files: dict[str, pathlib.Path]) -> Mnist16:
    """Verify the four files and return full MNIST resized to 16x16 (uint8).

    The first call reads, verifies and resizes (about 1.5 s); the result is kept in memory for
    the process. Since only the original files pass verification, later calls (with any
    verified copy of MNIST) only check the checksums (memoised per file) and reuse it.
    """
    global _MNIST16
    paths = {k: str(files[k]) for k in MNIST_FILES}
    if _MNIST16 is not None:
        for k, p in paths.items():
            verify_file(MNIST_FILES[k], p)
        return _MNIST16._replace(files=paths)
    from thermonet.data._preprocess import resize16

    arrays = {k: read_verified(MNIST_FILES[k], p) for k, p in paths.items()}
    logger.info("resizing the 70,000 MNIST images to 16x16 with Pillow")
    out = Mnist16(
        train16=resize16(arrays["train-images"]),
        train_labels=arrays["train-labels"],
        test16=resize16(arrays["t10k-images"]),
        test_labels=arrays["t10k-labels"],
        sha256={k: MNIST_FILES[k].sha256 for k in MNIST_FILES},
        files=paths,
    )
    for arr in out[:4]:
        arr.setflags(write=False)  # shared between calls: never hand these out writable
    _MNIST16 = out
    return out


def clear_cache() -> None:
    """Forget memoised checksums and the in-memory resized MNIST."""
    global _MNIST16
    _SHA_MEMO.clear()
    _MNIST16 = None
