"""Download the four MNIST files from public mirrors, verified by SHA-256."""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Sequence

from thermonet.data._files import new_temp_file
from thermonet.data._mnist import (
    MNIST_FILES,
    MnistFile,
    PathLike,
    uncompressed_sha256,
)
from thermonet.errors import DataError

logger = logging.getLogger("thermonet.data")

#: Tried in order; each must serve ``<mirror>/<name>.gz`` for the four original file names.
DEFAULT_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
_CHUNK = 1 << 20


def _existing_ok(dest: pathlib.Path, spec: MnistFile) -> pathlib.Path | None:
    for cand in (dest / spec.filename, dest / (spec.filename + ".gz")):
        if cand.is_file():
            try:
                sha, _ = uncompressed_sha256(cand)
            except DataError:
                continue
            if sha == spec.sha256:
                return cand
            logger.warning("%s is corrupt (SHA-256 %s... of its contents, expected %s...): "
                           "delete it; an intact copy is kept or downloaded beside it",
                           cand, sha[:16], spec.sha256[:16])
    return None


def check_mirror(mirror: str) -> None:
    """Refuse a ``--mirror`` that is not an http(s), ftp or file URL (one line)."""
    from urllib.parse import urlparse

    try:
        url = urlparse(mirror)
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https", "ftp", "file") or (
            url.scheme != "file" and not url.netloc):
        raise DataError(f"--mirror {mirror!r} is not a URL; expected a base URL that serves the "
                        "four MNIST .gz files, e.g. --mirror "
                        f"{DEFAULT_MIRRORS[0]}")


def _download(url: str, out: pathlib.Path, limit: int, timeout: float) -> None:
    import urllib.request  # here, not at import: http, email and ssl take 0.1 s

    from thermonet import __version__

    req = urllib.request.Request(url, headers={"User-Agent": f"thermonet/{__version__}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(out, "wb") as fh:
        total = 0
        while chunk := resp.read(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise DataError(f"more than {limit:,} bytes, larger than the file can be")
            fh.write(chunk)


def _try_mirror(url: str, tmp: pathlib.Path, final: pathlib.Path, spec: MnistFile,
                timeout: float) -> str | None:
    """Download ``url`` into ``tmp`` and, verified, rename it to ``final``: None, or why not."""
    import urllib.error

    try:
        logger.info("downloading %s", url)
        _download(url, tmp, limit=spec.nbytes + (1 << 20), timeout=timeout)
        sha, size = uncompressed_sha256(tmp)
        if sha != spec.sha256:
            return (f"{url}: wrong SHA-256 {sha[:16]}... of {size:,} "
                    f"uncompressed bytes (expected {spec.sha256[:16]}...)")
        os.replace(tmp, final)
        return None
    except urllib.error.HTTPError as err:
        err.close()
        return f"{url}: HTTP {err.code} {err.reason}"
    except urllib.error.URLError as err:
        return f"{url}: {err.reason}"
    except DataError as err:
        return f"{url}: {err}"
    except OSError as err:
        return f"{url}: {type(err).__name__}: {err}"
    finally:
        tmp.unlink(missing_ok=True)


def _fetch_file(dest: pathlib.Path, spec: MnistFile, mirrors: Sequence[str],
                timeout: float) -> pathlib.Path:
    """``spec``'s file from the first mirror that serves it intact (one line naming each
    mirror's failure if none does)."""
    final = dest / (spec.filename + ".gz")
    failures: list[str] = []
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + spec.filename + ".gz"
        failure = _try_mirror(url, new_temp_file(dest, f".{final.name}.", ".part"), final, spec,
                              timeout)
        if failure is None:
            return final
        failures.append(failure)
    raise DataError(f"could not download {spec.filename}.gz from any mirror: "
                    + "; ".join(failures)
                    + f". Check the network, or copy the four MNIST .gz files into {dest} "
                      "by hand (any MNIST mirror; they are verified by SHA-256)")


def fetch_mnist(dest: PathLike, *, mirrors: Sequence[str] = DEFAULT_MIRRORS,
                timeout: float = 30) -> dict[str, pathlib.Path]:
    """Download the four gzip-compressed MNIST files into ``dest``, verified.

    Files already in ``dest`` (raw or .gz) with the right checksum are kept. Each missing file
    is tried on each mirror in turn; a download that fails or has the wrong SHA-256 (of its
    uncompressed contents) is discarded and the next mirror is tried. Downloads go to a hidden
    temporary file in ``dest`` that is renamed only once verified, so a partial or corrupt file
    never appears under the final name.

    Parameters
    ----------
    dest : path-like
        Target directory (created if needed).
    mirrors : sequence of str
        Base URLs, tried in order.
    timeout : float
        Seconds, per connection attempt and per read.

    Returns
    -------
    dict
        File key (``"train-images"`` ...) -> path of the verified file.

    Raises
    ------
    DataError
        A file could not be obtained from any mirror; the message lists each mirror's failure.
    """
    dest = pathlib.Path(dest).expanduser()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"cannot create the MNIST directory {dest}: {err.strerror or err}; "
                        f"choose another with --dest or THERMONET_MNIST_DIR") from None
    if not mirrors:
        raise DataError("no mirrors given; expected at least one base URL")
    for mirror in mirrors:
        check_mirror(mirror)
    out: dict[str, pathlib.Path] = {}
    for key, spec in MNIST_FILES.items():
        existing = _existing_ok(dest, spec)
        if existing is not None:
            logger.info("%s is already present and verified", existing)
            out[key] = existing
            continue
        out[key] = _fetch_file(dest, spec, mirrors, timeout)
    return out
