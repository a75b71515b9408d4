"""Build the docs site and save screenshots of its home page and one API page.

A look at what a reader sees, not a test: ``python scripts/screenshot_docs.py [--out DIR]``.
Needs mkdocs (``pip install -e ".[docs]"``) and a headless Chromium (Debian: ``apt-get
install chromium``); writes ``home.png`` and ``api.png`` into DIR (default ``site-shots/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"home.png": "index.html", "api.png": "reference/api/index.html"}


def chromium() -> str:
    """The path of a Chromium binary, or exit with a one-line error."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("error: no Chromium found; install it (Debian: apt-get install chromium)")


def main() -> None:
    """Build the site into a temporary folder and screenshot its pages."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "site-shots")
    ap.add_argument("--size", default="1280,1600", help="window width,height in pixels")
    args = ap.parse_args()
    browser = chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--site-dir", str(site)], cwd=ROOT, check=True,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        for shot, page in PAGES.items():
            target = args.out / shot
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--window-size={args.size}",
                            f"--screenshot={target}", (site / page).as_uri()],
                           check=True, capture_output=True, timeout=120)
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
