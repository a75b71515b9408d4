#!/usr/bin/env python
"""Build thermonet's embedded data file (thermonet/data/embedded/mnist16.h5) from real MNIST.

The file holds the Pillow-resized uint8 16x16 images of the union of the paper's D50, D500 and
D5000 training sets and of the 10,000 official test images, with labels, indices and the
provenance of the build (source SHA-256s, Pillow version, normalisation constants, this
command). Usage, from the repository root:

    python scripts/build_embedded_data.py --mnist-dir DIR [--out PATH]

DIR holds the four original MNIST IDX files (raw or .gz); they are verified by SHA-256. The same
build is available as ``thermonet data build-embedded``.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys

from thermonet.data import EMBEDDED_PATH, build_embedded
from thermonet.errors import ThermonetError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist-dir", required=True, type=pathlib.Path,
                        help="directory holding the four MNIST IDX files (raw or .gz)")
    parser.add_argument("--out", type=pathlib.Path, default=EMBEDDED_PATH,
                        help=f"output file (default: {EMBEDDED_PATH})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        out = build_embedded(args.mnist_dir, args.out)
    except ThermonetError as err:
        sys.stderr.write(f"error: {err}\n")
        return 1
    sys.stdout.write(f"wrote {out} ({out.stat().st_size:,} bytes)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
