"""Integrity of a run directory: checksums in checkpoint.h5 and the trace segments, and a trace
that tiles the checkpoint's iterations. Every damage a fault campaign found accepted silently is
refused by `thermonet resume` and `thermonet info` with one line, and nothing is changed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import TINY as RUNNER_GAUSS
from thermonet import config as cfgmod
from thermonet.cli import main
from thermonet.errors import CheckpointError, IntegrityError
from thermonet.io import checkpoint as ckpt
from thermonet.io import digest, trace
from thermonet.runner import Run, detach_log

#: 12 iterations, a checkpoint every 3 (segments 1-3, 4-6, 7-9, 10-12), a sample every 2:
#: the runner tests' configuration without production adaptation
GAUSS = RUNNER_GAUSS.replace("adapt_every = 5\n", "")

MIDDLE = "it000000004-000000006.h5"
LAST = "it000000010-000000012.h5"


def _make_run(cfg_path: Path, out: Path, **overrides: object) -> Path:
    Run.create(cfgmod.load(cfg_path, dict(overrides)), out).run(quiet=True)
    detach_log()
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished 12-iteration run, a run of the same configuration stopped at 6 iterations,
    and another finished run (another run id)."""
    base = tmp_path_factory.mktemp("integrity")
    cfg_path = base / "gauss.toml"
    cfg_path.write_text(GAUSS)
    return {"cfg": cfg_path, "run": _make_run(cfg_path, base / "run"),
            "half": _make_run(cfg_path, base / "half", **{"run.n_iterations": 6}),
            "other": _make_run(cfg_path, base / "other")}


@pytest.fixture
def run_dir(made, tmp_path):
    """A private copy of the finished run."""
    return Path(shutil.copytree(made["run"], tmp_path / "run"))


def _snapshot(d: Path) -> dict[str, tuple[str, int]]:
    """Every file under d but the run directory's lock (which `resume` takes, and empties
    again, before it refuses): content digest and modification time."""
    return {str(p.relative_to(d)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                    p.stat().st_mtime_ns)
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".thermonet.lock"}


def _refused(d: Path, *match: str) -> None:
    """`thermonet resume` and `thermonet info` both refuse d with one line naming ``match``,
    exit code != 0, and leave every file as it was."""
    before = _snapshot(d)
    for args in (["resume", str(d), "--iterations", "20"], ["info", str(d)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0, (args, res.output)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        lines = res.output.strip().splitlines()
        assert len(lines) == 1, res.output
        assert lines[0].startswith("Error: "), res.output
        for m in match:
            assert m in lines[0], (m, lines[0])
    assert _snapshot(d) == before              # a refused open changes nothing


def _flip_dataset(path: Path, name: str, index: int = 0) -> None:
    """Flip the lowest bit of one element of a dataset, in place."""
    with h5py.File(path, "r+") as fh:
        a = fh[name][()]
        flat = a.reshape(-1).copy()
        if flat.dtype.kind == "f":
            flat.view(np.uint64 if flat.dtype.itemsize == 8 else np.uint32)[index] ^= 1
        else:
            flat[index] ^= 1
        fh[name][...] = flat.reshape(a.shape)


def _edit_rng(s: str) -> str:
    states = json.loads(s)
    states[1]["state"]["state"] ^= 1
    return json.dumps(states)


def _edit_counters(s: str) -> str:
    counters = json.loads(s)
    counters["elapsed_s"] += 1.0
    return json.dumps(counters, sort_keys=True)


ATTRIBUTE_EDITS: dict[str, Callable[[object], object]] = {
    "iteration": lambda v: np.int64(int(v) ^ 1),
    "rng": lambda v: _edit_rng(str(v)),
    "counters": lambda v: _edit_counters(str(v)),
    "run_uuid": lambda v: "0" + str(v)[1:] if str(v)[0] != "0" else "1" + str(v)[1:],
    "config_toml": lambda v: str(v).replace("seed = 5", "seed = 4"),
}


# --- the checkpoint ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["state/grad", "state/step_size", "state/theta", "state/energy",
                                  "ladder/replica_k", "ladder/temperature_k"])
def test_a_flipped_checkpoint_element_is_refused(run_dir, name):
    _flip_dataset(run_dir / "checkpoint.h5", name, index=1)
    _refused(run_dir, "checkpoint.h5 is damaged", f"checksum mismatch in dataset {name}",
             "from a backup", "thermonet run")


@pytest.mark.parametrize("attr", sorted(ATTRIBUTE_EDITS))
def test_an_edited_checkpoint_attribute_is_refused(run_dir, attr):
    with h5py.File(run_dir / "checkpoint.h5", "r+") as fh:
        new = ATTRIBUTE_EDITS[attr](fh.attrs[attr])
        assert new != fh.attrs[attr]
        fh.attrs[attr] = new
    _refused(run_dir, "checkpoint.h5 is damaged", f"checksum mismatch in attribute {attr}")


def test_a_deleted_checkpoint_dataset_is_refused(run_dir):
    with h5py.File(run_dir / "checkpoint.h5", "r+") as fh:
        del fh["state/grad"]
    _refused(run_dir, "checksum mismatch in the list of datasets")


def test_stripped_checksums_are_refused(run_dir):
    with h5py.File(run_dir / "checkpoint.h5", "r+") as fh:
        del fh.attrs[digest.HEADER_ATTR]
    _refused(run_dir, "has no checksums although its format version 2 carries them")


def test_a_truncated_checkpoint_is_refused(run_dir):
    p = run_dir / "checkpoint.h5"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    _refused(run_dir, "not a readable HDF5 file", "from a backup")


# --- the trace -----------------------------------------------------------------------------------

def test_a_deleted_middle_segment_is_refused(run_dir):
    (run_dir / "trace" / MIDDLE).unlink()
    _refused(run_dir, "the trace lacks iterations 4-6 of the checkpoint's 1-12",
             "segment file deleted?", "thermonet run")
    with pytest.raises(IntegrityError, match="lacks iterations 4-6"):
        trace.read_trace(run_dir)              # a gap is found without the checkpoint too


def test_a_deleted_last_segment_is_refused(run_dir):
    (run_dir / "trace" / LAST).unlink()
    _refused(run_dir, "the trace lacks iterations 10-12 of the checkpoint's 1-12")


def test_several_missing_ranges_are_named(run_dir):
    (run_dir / "trace" / MIDDLE).unlink()
    (run_dir / "trace" / LAST).unlink()
    _refused(run_dir, "lacks iterations 4-6, 10-12")


def test_a_truncated_segment_is_refused(run_dir):
    p = run_dir / "trace" / MIDDLE
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    _refused(run_dir, MIDDLE, "truncated or corrupt", "from a backup")


@pytest.mark.parametrize("name", ["energy_k", "replica_k", "samples/theta"])
def test_a_flipped_segment_element_is_refused(run_dir, name):
    _flip_dataset(run_dir / "trace" / MIDDLE, name, index=2)
    _refused(run_dir, f"{MIDDLE} is damaged", f"checksum mismatch in dataset {name}")
    with pytest.raises(IntegrityError, match=f"dataset {name}"):
        trace.read_trace(run_dir, samples=True)


def test_a_segment_of_another_run_is_refused(made, run_dir):
    shutil.copy(made["other"] / "trace" / MIDDLE, run_dir / "trace" / MIDDLE)
    _refused(run_dir, MIDDLE, "belongs to another run")


def test_a_segment_whose_rows_disagree_with_its_name_is_refused(run_dir):
    # a correctly checksummed segment renamed: its rows are iterations 4-6, its name says 7-9
    (run_dir / "trace" / "it000000007-000000009.h5").unlink()
    shutil.copy(run_dir / "trace" / MIDDLE, run_dir / "trace" / "it000000007-000000009.h5")
    _refused(run_dir, "holds 3 rows (4-6) but its name says iterations 7-9")


def test_an_overlapping_segment_is_refused(run_dir):
    shutil.copy(run_dir / "trace" / MIDDLE, run_dir / "trace" / "it000000004-000000005.h5")
    _refused(run_dir, "overlaps iterations")


def test_the_refusal_is_one_line_from_the_real_command_line(run_dir):
    _flip_dataset(run_dir / "trace" / MIDDLE, "energy_k")
    for command in ("resume", "info"):
        proc = subprocess.run([sys.executable, "-m", "thermonet.cli", command, str(run_dir)],
                              capture_output=True, text=True, timeout=300, check=False,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "checksum mismatch in dataset energy_k" in lines[0], \
            proc.stderr
        assert "Traceback" not in proc.stderr


# --- what still works ------------------------------------------------------------------------------

def test_an_intact_run_resumes_bit_identically(made, tmp_path):
    half = Path(shutil.copytree(made["half"], tmp_path / "half"))
    res = CliRunner().invoke(main, ["-q", "resume", str(half), "--iterations", "12"])
    assert res.exit_code == 0, res.output
    a, b = ckpt.read_checkpoint(made["run"]), ckpt.read_checkpoint(half)
    assert a.iteration == b.iteration == 12 and a.rng_states == b.rng_states
    assert np.array_equal(a.replica_k, b.replica_k)
    for k in a.slots:
        assert np.array_equal(a.slots[k], b.slots[k]), k
    ta, tb = (trace.read_trace(d, samples=True, through=12) for d in (made["run"], half))
    assert ta.keys() == tb.keys()
    for k in ta:
        assert np.array_equal(ta[k], tb[k]), k
    res = CliRunner().invoke(main, ["info", str(half)])
    assert res.exit_code == 0, res.output


def test_a_segment_beyond_the_checkpoint_is_a_crash_leftover(made, tmp_path):
    """A segment of this run written before a crash replaced the checkpoint is not part of the
    run: it is accepted on reading and removed by resume, which regenerates it identically."""
    half = Path(shutil.copytree(made["half"], tmp_path / "half"))
    ahead = Path(shutil.copytree(made["half"], tmp_path / "ahead"))
    res = CliRunner().invoke(main, ["-q", "resume", str(ahead), "--iterations", "9"])
    assert res.exit_code == 0, res.output
    shutil.copy(ahead / "trace" / "it000000007-000000009.h5", half / "trace")
    assert ckpt.read_checkpoint(half).iteration == 6
    res = CliRunner().invoke(main, ["-q", "resume", str(half), "--iterations", "9"])
    assert res.exit_code == 0, res.output
    assert np.array_equal(trace.read_trace(half)["energy_k"], trace.read_trace(ahead)["energy_k"])


def test_checksums_cover_what_the_reader_sees(run_dir):
    with h5py.File(run_dir / "checkpoint.h5", "r") as fh:
        assert fh.attrs["format_version"] == ckpt.FORMAT_VERSION == 2
        header = json.loads(fh.attrs[digest.HEADER_ATTR])
        for key in ("iteration", "run_uuid", "rng", "counters", "config_toml",
                    digest.DATASETS_KEY):
            assert key in header
        for name in digest.dataset_paths(fh):
            assert fh[name].attrs[digest.DATASET_ATTR] == digest.array_digest(fh[name][()])
    # the same bytes in another dtype or shape have another digest
    a = np.arange(6, dtype=np.int64)
    assert digest.array_digest(a) != digest.array_digest(a.reshape(2, 3))
    assert digest.array_digest(a) != digest.array_digest(a.view(np.float64))


def test_the_formats_page_recipe_checks_a_digest_without_thermonet(run_dir):
    """docs/formats.md shows how to check a digest with h5py alone; it must agree."""
    text = (Path(__file__).parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    block = text.split("## Integrity", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block.replace("runs/r/", f"{run_dir}/"), "formats.md", "exec"), {})
    _flip_dataset(run_dir / "checkpoint.h5", "state/theta")
    with pytest.raises(AssertionError):
        exec(compile(block.replace("runs/r/", f"{run_dir}/"), "formats.md", "exec"), {})


def test_the_recovery_the_messages_offer_repeats_the_run(made, tmp_path):
    """`thermonet run DIR/config.toml --out NEW_DIR`, which every refusal offers, regenerates
    the run's checkpoint and trace exactly (under another run id)."""
    new = tmp_path / "new"
    res = CliRunner().invoke(main, ["-q", "run", str(made["run"] / "config.toml"),
                                    "--out", str(new)])
    assert res.exit_code == 0, res.output
    a, b = ckpt.read_checkpoint(made["run"]), ckpt.read_checkpoint(new)
    assert a.run_uuid != b.run_uuid and a.rng_states == b.rng_states
    ta, tb = (trace.read_trace(d, samples=True) for d in (made["run"], new))
    for k in ta:
        assert np.array_equal(ta[k], tb[k]), k


def _make_legacy(path: Path) -> None:
    """Turn a file into what thermonet wrote before checksums: format version 1, no digests."""
    with h5py.File(path, "r+") as fh:
        fh.attrs["format_version"] = 1
        del fh.attrs[digest.HEADER_ATTR]
        for name in digest.dataset_paths(fh):
            del fh[name].attrs[digest.DATASET_ATTR]


def test_a_run_from_before_checksums_still_opens_with_a_note(made, tmp_path, caplog):
    half = Path(shutil.copytree(made["half"], tmp_path / "half"))
    for p in [half / "checkpoint.h5", *(half / "trace").glob("*.h5")]:
        _make_legacy(p)
    with caplog.at_level(logging.INFO, logger="thermonet.io"):
        assert ckpt.read_checkpoint(half).iteration == 6
    notes = [r.getMessage() for r in caplog.records if r.name == "thermonet.io"]
    assert any("checkpoint.h5 was written before thermonet stored checksums" in n for n in notes)
    assert any("2 trace segment(s)" in n for n in notes)
    res = CliRunner().invoke(main, ["-q", "resume", str(half), "--iterations", "12"])
    assert res.exit_code == 0, res.output
    # the continuation writes checksummed files; the old segments stay as they were
    with h5py.File(half / "checkpoint.h5", "r") as fh:
        assert fh.attrs["format_version"] == 2 and digest.is_signed(fh)
    tr = trace.read_trace(half, samples=True, through=12)
    ref = trace.read_trace(made["run"], samples=True)
    for k in ref:
        assert np.array_equal(tr[k], ref[k]), k
    # a legacy trace still gets the completeness check
    (half / "trace" / "it000000001-000000003.h5").unlink()
    with pytest.raises(IntegrityError, match="lacks iterations 1-3"):
        ckpt.read_checkpoint(half)


def test_overwrite_still_discards_a_damaged_run(made, run_dir):
    (run_dir / "trace" / MIDDLE).unlink()
    res = CliRunner().invoke(main, ["-q", "run", str(made["cfg"]), "--out", str(run_dir),
                                    "--overwrite", "--set", "run.n_iterations=3"])
    assert res.exit_code == 0, res.output
    assert ckpt.read_checkpoint(run_dir).iteration == 3


def test_integrity_errors_are_checkpoint_errors():
    assert issubclass(IntegrityError, CheckpointError)


def test_a_damaged_checkpoint_is_refused_as_a_parameter_file_too(tmp_path):
    """`thermonet evaluate --params DIR/checkpoint.h5` reads state/theta: a flipped element is
    caught by its checksum there as well."""
    import h5py

    from thermonet import config as cfgmod
    from thermonet.errors import ParameterFileError
    from thermonet.params import load_params
    from thermonet.runner import Run, detach_log

    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "none"\n[architecture]\nname = "gaussian"\nn = 3\n'
                   '[init]\nminimise = false\nburn_in = [1]\n[run]\nn_iterations = 2\n')
    Run.create(cfgmod.load(cfg), tmp_path / "r").run()
    detach_log()
    ck = tmp_path / "r" / "checkpoint.h5"
    assert load_params(ck, 3, index=0).shape == (3,)
    with h5py.File(ck, "r+") as fh:
        fh["state/theta"][0, 1] += 1.0
    with pytest.raises(ParameterFileError, match="fails its checksum"):
        load_params(ck, 3, index=0)
