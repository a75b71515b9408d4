"""What many tests share: the run configs of tests/configs (the tiny run's text, and
:func:`variant` for the others), the CLI through Click's runner, a run directory's contents for
bitwise comparison, and the one-line error check."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner, Result

CONFIGS = Path(__file__).resolve().parent / "configs"

#: the tiny run's TOML text; variants are made from it with ``str.replace`` or :func:`variant`
TINY = (CONFIGS / "tiny.toml").read_text()

#: cheap TI settings for the exact Gaussian models (a ``[ti]`` table)
TI_FAST = (CONFIGS / "ti_fast.toml").read_text()

#: two data-free evidence models, A (3 unit wells) then B (5 wells of stiffness 4), whose box
#: integrals are exact; ``GAUSSIAN_MODELS.split("[model.B]")[0]`` is A alone
GAUSSIAN_MODELS = (CONFIGS / "gaussian_models.toml").read_text()

#: the ``[ladder]`` lines of an NRPT run on ``gaussian_3d`` whose warm-up places the rungs
#: between its fixed ones (T = 0.1, the anchor 1.0, the prior rung), for ``variant(ladder=)``
ADAPTED_LADDER = """
    prior_rung = true
    swap_scheme = "deo"
    adapt_rounds = 3
    adapt_round_length = 4
    anchors = [1.0]
    temperatures = [0.1, 0.3, 1.0, 2.0, 4.0]
"""

_HEADER = re.compile(r"\[[\w.-]+\]")


def variant(name: str, *, replace: Mapping[str, str] | None = None, **sections: str) -> str:
    """The TOML text of tests/configs/NAME.toml, edited: each ``replace`` key, a piece of the
    file's text that must occur exactly once, becomes its value; then each keyword's lines are
    added to that section (``run="seed = 4"`` puts ``seed = 4`` under ``[run]``), which is
    opened at the end when the file has none. A key the file sets already can change only
    through ``replace`` (TOML refuses a key set twice)."""
    text = (CONFIGS / f"{name}.toml").read_text()
    for old, new in (replace or {}).items():
        if text.count(old) != 1:
            raise ValueError(f"{old!r} occurs {text.count(old)} times in {name}.toml; "
                             "expected once: replace a piece of text that is there once")
        text = text.replace(old, new)
    lines = text.splitlines()
    for section, extra in sections.items():
        add = textwrap.dedent(extra).strip().splitlines()
        header = f"[{section}]"
        if header not in lines:
            lines += [header, *add]
            continue
        at = lines.index(header) + 1
        while at < len(lines) and not _HEADER.fullmatch(lines[at].strip()):
            at += 1
        lines[at:at] = add
    return "\n".join(lines) + "\n"


def invoke(*args: Any) -> Result:
    """``thermonet ARGS...`` in this process (Click's runner)."""
    from thermonet.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(res: Result) -> str:
    """The output of a refused command: exactly one non-empty line, no traceback (Click's
    runner catches an uncaught exception without printing it, hence the first check)."""
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    return lines[0]


def snapshot(directory: Path, *, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``directory`` (but those named in ``skip``), by content."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name not in skip}


def tree(run_dir: Path) -> dict[str, Any]:
    """Everything a run directory holds, for bitwise comparison."""
    from thermonet.io.checkpoint import read_checkpoint
    from thermonet.io.trace import read_trace

    ck = read_checkpoint(run_dir)
    tr = read_trace(run_dir, samples=True)
    return {"iteration": ck.iteration, "rng": ck.rng_states, "replica": ck.replica_k,
            "slots": ck.slots, "trace": tr}


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two :func:`tree` results are bit for bit equal."""
    assert a["iteration"] == b["iteration"]
    assert a["rng"] == b["rng"]
    assert np.array_equal(a["replica"], b["replica"])
    assert a["slots"].keys() == b["slots"].keys()
    for k in a["slots"]:
        assert np.array_equal(a["slots"][k], b["slots"][k]), k
    assert a["trace"].keys() == b["trace"].keys()
    for k in a["trace"]:
        assert np.array_equal(a["trace"][k], b["trace"][k]), k


def run_copying_warmup_checkpoints(cfg: Any, out: Path, copies: Path,
                                   monkeypatch: Any) -> list[tuple[Path, dict[str, Any]]]:
    """Run ``cfg`` into ``out``, copying the run directory each time a checkpoint is written
    during the warm-up (each copy is what a kill -9 right after that write leaves). Returns
    the copies, ``copies/snap0``, ..., with the warm-up's position at each."""
    import shutil

    from thermonet.runner import Run, detach_log

    snapshots: list[tuple[Path, dict[str, Any]]] = []
    write = Run.write_checkpoint

    def write_and_copy(self: Any) -> None:
        write(self)
        if self.warmup is not None:
            where = copies / f"snap{len(snapshots)}"
            shutil.copytree(self.dir, where)
            snapshots.append((where, self.warmup.position()))

    monkeypatch.setattr(Run, "write_checkpoint", write_and_copy)
    try:
        Run.create(cfg, out).run()
    finally:
        detach_log()
        monkeypatch.setattr(Run, "write_checkpoint", write)
    return snapshots
