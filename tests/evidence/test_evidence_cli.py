"""``thermonet evidence``: config, the command end to end on exact models, resume, refusal,
the convergence report's flag, and worker independence.

The end-to-end runs use two data-free Gaussian models, whose box integrals are known in
closed form, so the log Bayes factor has an exact value the command must reproduce within its
own reported error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import GAUSSIAN_MODELS, TI_FAST
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.evidence import config as evcfg
from thermonet.evidence import run as evrun

SAMPLE_RUNS = Path(__file__).resolve().parents[2] / "sample_runs"


def exact_log_integral(n: int, k: float, half_width: float = 5.0) -> float:
    """log ∫_{|w_i|<a} exp(-k w²/2) dw for n independent wells centred at 0 (T = 1)."""
    return n * math.log(math.sqrt(2 * math.pi / k) * math.erf(half_width * math.sqrt(k / 2)))


def write(tmp_path: Path, body: str, name: str = "ev.toml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, ["-q", "evidence", *map(str, args)])


def numbers(summary: dict) -> list[float]:
    """Every estimate of a summary (repeats and convergence variants), in a fixed order."""
    out = []
    for r in summary["rows"]:
        out += [x["log_integral"] for x in r["repeats"]]
        if r["convergence"]:
            out += [v["log_integral"] for v in r["convergence"]["variants"]]
        out.append(r["energy0"])
    return out


# --- configuration ------------------------------------------------------------------------------

def _resolve(text: str):
    import tomllib

    return evcfg.resolve(tomllib.loads(text))


def test_config_defaults_and_ti_settings_are_filled():
    cfg = _resolve("[data]\nname = 'none'\n" + GAUSSIAN_MODELS)
    ev = cfg["evidence"]
    assert (ev["repeats"], ev["n_minima"], ev["workers"], ev["tolerance"]) == (1, 1, 1, 3.0)
    assert ev["convergence"] is True and cfg["ti"]["method"] == "converged"
    assert cfg["ti"]["n_bridges"] == 100                  # the paper's default
    assert cfg.sources["ti.n_bridges"] == "default" and cfg.sources["model.A.n"] == "config"
    assert cfg["minimiser"]["name"] == "rmin" and cfg["minimiser"]["grad_tol"] == 1e-5
    assert list(cfg["model"]) == ["A", "B"]


@pytest.mark.parametrize("text, expected", [
    ("[evidence]\nrepeat = 2\n", "did you mean 'repeats'"),
    ("[ti]\nn_bridge = 5\n", "did you mean 'n_bridges'"),
    ("[evidence]\nrepeats = '2'\n", "evidence.repeats = '2' has the wrong type; expected integer"),
    ("[evidence]\nrepeats = 0\n", "out of range; expected an integer >= 1"),
    ("[ti]\nmethod = 'fast'\n", ("ti.method = 'fast' is not a TI method; expected one of "
                                "'converged', 'paper'")),
    ("[ti]\ntemperature = 2.0\n", "set evidence.temperature"),
    ("[ti]\nn_samples = 1\n", "[ti] settings rejected: TI n_samples = 1"),
    ("[run]\nseed = 1\n", "looks like a `thermonet run` config"),
    ("[model.C]\narchitecture = 'gaussian'\nstifness = 2.0\n", "did you mean 'stiffness'"),
    ("[model.C]\nn = 2\n", "needs architecture"),
    ("[laplace]\ntemperature = 2.0\n", "set evidence.temperature"),
    ("[laplace]\nn_probe = 2\n", "did you mean 'n_probes'"),
])
def test_config_errors_are_one_line_with_the_fix(text, expected):
    body = "[data]\nname = 'none'\n" + text + ("" if "[model." in text else GAUSSIAN_MODELS)
    with pytest.raises(ConfigError) as exc:
        _resolve(body)
    msg = str(exc.value)
    assert expected in msg, msg
    assert "\n" not in msg


def test_ti_typo_lists_only_keys_that_ti_accepts():
    with pytest.raises(ConfigError) as exc:
        _resolve("[data]\nname = 'none'\n[ti]\nn_bridge = 5\n" + GAUSSIAN_MODELS)
    valid = str(exc.value).split("Valid keys: ")[1].split(", ")
    assert "n_bridges" in valid and "temperature" not in valid


def test_config_without_models_and_params_shortfall(tmp_path):
    with pytest.raises(ConfigError, match="at least one model"):
        _resolve("[data]\nname = 'none'\n")
    with pytest.raises(ConfigError, match=r"model.A.params: .*nothing.npy does not exist"):
        _resolve("[data]\nname = 'none'\n[model.A]\narchitecture = 'gaussian'\nn = 3\n"
                 f"params = '{tmp_path / 'nothing.npy'}'\n")
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(ConfigError, match="holds 1 parameter vector.*n_minima = 2"):
        _resolve(f"[data]\nname = 'none'\n[evidence]\nn_minima = 2\n[model.A]\n"
                 f"architecture = 'gaussian'\nn = 3\nparams = '{tmp_path / 'one.npy'}'\n")


def test_command_reports_config_errors_in_one_line(tmp_path):
    cfg = write(tmp_path, "[data]\nname = 'none'\n[evidence]\nrepaets = 2\n" + GAUSSIAN_MODELS)
    res = invoke(cfg, "--out", tmp_path / "o")
    assert res.exit_code == 1
    assert "did you mean 'repeats'" in res.output and res.output.count("\n") == 1
    assert not (tmp_path / "o").exists()                 # nothing started


def test_agreement_criterion():
    a = evrun.agreement(10.0, 0.3, 10.0 + 2.9 * math.hypot(0.3, 0.4), 0.4, 3.0)
    assert a["passed"] and a["allowed"] == pytest.approx(1.5)
    b = evrun.agreement(10.0, 0.3, 10.0 - 3.1 * 0.5, 0.4, 3.0)
    assert not b["passed"] and b["delta"] == pytest.approx(-1.55)
    assert not evrun.agreement(1.0, 0.1, math.nan, 0.1, 3.0)["passed"]
    assert not evrun.agreement(1.0, math.nan, 1.0, 0.1, 3.0)["passed"]


def test_seeds_depend_on_the_task_only():
    s = evrun.task_seed(7, "M1", 2, "rep001")
    assert s == evrun.task_seed(7, "M1", 2, "rep001")
    assert len({s, evrun.task_seed(7, "M3", 2, "rep001"), evrun.task_seed(7, "M1", 1, "rep001"),
                evrun.task_seed(7, "M1", 2, "rep000"), evrun.task_seed(8, "M1", 2, "rep001")}) == 5


def test_sample_configs_parse_and_the_full_one_has_the_papers_settings():
    full = evcfg.load(SAMPLE_RUNS / "evidence_M1_vs_M3_D500.toml")
    quick = evcfg.load(SAMPLE_RUNS / "evidence_M1_vs_M3_D500_quick.toml")
    for cfg in (full, quick):
        assert cfg["data"]["name"] == "D500"
        assert {m["architecture"] for m in cfg["model"].values()} == {"M1", "M3"}
    ti = full["ti"]
    assert (ti["n_bridges"], ti["n_burn_in"], ti["n_samples"], ti["n_leapfrog"]) == (
        100, 100, 100, 100)
    assert (ti["kfit_burn_in"], ti["kfit_samples"], ti["readapt_every"]) == (1000, 1000, 10)
    assert full["evidence"]["repeats"] == 28 and full["evidence"]["temperature"] == 1.0


# --- end to end on exact models -----------------------------------------------------------------

@pytest.fixture(scope="module")
def exact_run(tmp_path_factory):
    """A and B with the convergence report, one TI each; the command's output and summary."""
    tmp = tmp_path_factory.mktemp("ev")
    cfg = write(tmp, "[evidence]\nseed = 1\n[data]\nname = 'none'\n" + TI_FAST + GAUSSIAN_MODELS)
    res = invoke(cfg, "--out", tmp / "out")
    return cfg, tmp / "out", res


def test_exact_bayes_factor_within_the_reported_error(exact_run):
    _, out, res = exact_run
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    exact = {"A": exact_log_integral(3, 1.0), "B": exact_log_integral(5, 4.0)}
    for r in s["rows"]:
        assert abs(r["log_integral"] - exact[r["model"]]) < 4 * r["log_integral_error"], r
        assert r["log_volume"] == pytest.approx(r["n_params"] * math.log(10.0))
        assert r["log_evidence"] == pytest.approx(r["log_integral"] - r["log_volume"])
        assert r["converged"] is True
    (f,) = s["bayes_factors"]
    exact_bf = (exact["B"] - 5 * math.log(10.0)) - (exact["A"] - 3 * math.log(10.0))
    assert (f["numerator"], f["denominator"]) == ("B", "A")
    assert 0 < f["ti_error"] < 0.5
    assert abs(f["ti"] - exact_bf) < 4 * f["ti_error"], (f, exact_bf)
    # Laplace is exact for a Gaussian well the box hardly cuts (erf(5/sqrt(2)) = 1 - 6e-7)
    for r in s["rows"]:
        assert r["laplace_log_evidence"] == pytest.approx(
            exact[r["model"]] - r["log_volume"], abs=1e-5)
    assert f["laplace"] == pytest.approx(exact_bf, abs=1e-5)
    # printed as stored
    printed = next(ln for ln in res.output.splitlines() if ln.startswith("ln[p(B|D)/p(A|D)]"))
    assert evrun.pm(f["ti"], f["ti_error"]) in printed
    assert "NOT CONVERGED" not in res.output and "unchecked" not in printed


def test_run_directory_holds_json_hdf5_and_every_run(exact_run):
    import h5py

    _, out, _ = exact_run
    s = json.loads((out / "summary.json").read_text())
    with h5py.File(out / "summary.h5", "r") as fh:
        g = fh["model/B/min000"]
        assert g.attrs["log_integral"] == s["rows"][1]["log_integral"]
        assert g.attrs["converged"] == "yes"
        assert list(g["convergence/variant"][()].astype(str)) == list(evrun.VARIANTS)
        assert g["ti_details/dj_mean"].shape == (12,)     # n_bridges + 2 λ points
    for model in ("A", "B"):
        theta = np.load(out / "minima" / model / "min000.npy")
        assert np.max(np.abs(theta)) < 1e-3                # the minimum at 0
        for label in ("rep000", *(f"conv-{v}" for v in evrun.VARIANTS)):
            assert (out / "ti" / model / "min000" / label / "result.json").is_file()
    bridges = json.loads((out / "ti/A/min000/conv-bridges2/result.json").read_text())
    assert len(bridges["details"]["lambdas"]) == 2 * 12
    back = evrun.result_from_dict(bridges)          # result.json reads back as the result
    assert back.as_dict()["log_evidence"] == bridges["log_evidence"]
    assert back.details["lambdas"] == bridges["details"]["lambdas"]
    assert "convergence report" in (out / "table.txt").read_text()


def test_rerun_of_a_finished_directory_recomputes_nothing(exact_run, monkeypatch):
    cfg, out, first = exact_run
    from thermonet.evidence.ti import integration as ti

    def boom(*a, **k):
        raise AssertionError("a finished TI was run again")

    monkeypatch.setattr(ti, "thermodynamic_integration", boom)
    monkeypatch.setattr(ti, "fit_reference", boom)
    res = invoke(cfg, "--out", out)
    assert res.exit_code == 0, res.output
    assert res.output == first.output
    res = invoke(cfg, "--out", out, "--json")
    assert res.exit_code == 0, res.output
    stored = json.loads((out / "summary.json").read_text())
    printed = json.loads(res.output)
    assert printed["bayes_factors"] == stored["bayes_factors"]
    assert printed["rows"][0]["log_integral"] == stored["rows"][0]["log_integral"]


def test_a_directory_with_another_config_is_refused(exact_run, tmp_path):
    cfg, out, _ = exact_run
    before = (out / "summary.json").read_text()
    res = invoke(cfg, "--out", out, "--set", "ti.n_samples=60")
    assert res.exit_code == 1
    assert "different configuration (ti.n_samples: 50 -> 60)" in res.output
    assert res.output.count("\n") == 1
    assert (out / "summary.json").read_text() == before   # nothing lost
    run_dir = tmp_path / "sampling"
    run_dir.mkdir()
    (run_dir / "checkpoint.h5").write_bytes(b"")
    res = invoke(cfg, "--out", run_dir)
    assert res.exit_code == 1 and "holds a `thermonet run` sampling run" in res.output


def test_resume_after_interruption_gives_the_same_numbers(tmp_path, monkeypatch):
    body = "[evidence]\nseed = 5\nlaplace = false\nrepeats = 2\n[data]\nname = 'none'\n" \
        + TI_FAST + GAUSSIAN_MODELS.split("[model.B]")[0]
    cfg = write(tmp_path, body)
    whole = invoke(cfg, "--out", tmp_path / "whole")
    assert whole.exit_code == 0, whole.output

    class Interrupt(Exception):
        pass

    calls = {"n": 0}
    real = evrun.Evidence._lambda_progress

    def stopping(self, what):
        inner = real(self, what)

        def progress(j, n, info):
            inner(j, n, info)
            calls["n"] += 1
            if calls["n"] == 40:          # inside the 4th of 8 TI runs (12 λ points each)
                raise Interrupt

        return progress

    monkeypatch.setattr(evrun.Evidence, "_lambda_progress", stopping)
    cut = invoke(cfg, "--out", tmp_path / "cut")
    assert isinstance(cut.exception, Interrupt)
    done = sorted(p.parent.name for p in (tmp_path / "cut").rglob("result.json"))
    assert len(done) == 3 and not (tmp_path / "cut" / "summary.json").exists()
    monkeypatch.setattr(evrun.Evidence, "_lambda_progress", real)
    from thermonet.evidence.ti import integration as ti

    n_ti = {"n": 0}
    real_ti = ti.thermodynamic_integration

    def counting(*a, **k):
        n_ti["n"] += 1
        return real_ti(*a, **k)

    monkeypatch.setattr(ti, "thermodynamic_integration", counting)
    resumed = invoke(cfg, "--out", tmp_path / "cut")
    assert resumed.exit_code == 0, resumed.output
    assert n_ti["n"] == 8 - 3                              # finished runs are not redone
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())
    b = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert numbers(a) == numbers(b)                        # bit for bit
    assert resumed.output == whole.output


def test_workers_do_not_change_the_result(tmp_path):
    body = "[evidence]\nseed = 2\nlaplace = false\nrepeats = 3\nn_minima = 2\n" \
        "[data]\nname = 'none'\n" + TI_FAST + GAUSSIAN_MODELS.split("[model.B]")[0]
    cfg = write(tmp_path, body)
    one = invoke(cfg, "--out", tmp_path / "w1", "--no-convergence", "--workers", "1")
    two = invoke(cfg, "--out", tmp_path / "w2", "--no-convergence", "--workers", "2")
    assert one.exit_code == 0 and two.exit_code == 0, (one.output, two.output)
    a = json.loads((tmp_path / "w1" / "summary.json").read_text())
    b = json.loads((tmp_path / "w2" / "summary.json").read_text())
    assert numbers(a) == numbers(b) and len(numbers(a)) == 2 * (3 + 1)
    assert one.output == two.output
    # repeats summarised as mean ± sd, minima spread reported, numbers marked unchecked
    r = a["rows"][0]
    vals = [x["log_integral"] for x in r["repeats"]]
    assert r["log_integral"] == pytest.approx(np.mean(vals))
    assert r["log_integral_error"] == pytest.approx(np.std(vals, ddof=1))
    assert len({x["seed"] for x in r["repeats"]}) == 3
    assert "between the 2 minima of A" in one.output
    assert a["convergence_checked"] is False and a["converged"] is None
    assert "unchecked" in one.output and "not run (--no-convergence)" in one.output


def test_more_repeats_extend_a_directory(tmp_path):
    body = "[evidence]\nseed = 2\nlaplace = false\n[data]\nname = 'none'\n" + TI_FAST \
        + GAUSSIAN_MODELS.split("[model.B]")[0]
    cfg = write(tmp_path, body)
    first = invoke(cfg, "--out", tmp_path / "o", "--no-convergence")
    assert first.exit_code == 0, first.output
    more = invoke(cfg, "--out", tmp_path / "o", "--no-convergence", "--set",
                  "evidence.repeats=2")
    assert more.exit_code == 0, more.output
    s1 = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert len(s1["rows"][0]["repeats"]) == 2


@pytest.mark.slow
def test_the_report_at_the_first_minima_only(tmp_path):
    """``convergence_minima = 1``: the variants run at minimum 0 alone (the same numbers as
    when every minimum is checked), the other minima run only their repeats and are marked
    unchecked, and the report says so; raising it later extends the directory."""
    body = ("[evidence]\nseed = 1\nlaplace = false\nn_minima = 3\n[data]\nname = 'none'\n"
            + TI_FAST + GAUSSIAN_MODELS.split("[model.B]")[0])
    cfg = write(tmp_path, body)
    part = invoke(cfg, "--out", tmp_path / "part", "--set", "evidence.convergence_minima=1")
    assert part.exit_code == 0, part.output
    s = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert [r["converged"] is not None for r in s["rows"]] == [True, False, False]
    assert s["convergence_minima"] == 1 and s["converged"] is s["rows"][0]["converged"]
    assert sorted(p.name for p in (tmp_path / "part" / "ti" / "A").iterdir()) == [
        "min000", "min001", "min002"]
    assert [sorted(p.name for p in (tmp_path / "part" / "ti" / "A" / f"min{j:03d}").iterdir())
            for j in (1, 2)] == [["rep000"], ["rep000"]]
    assert "minima 1-2 of each model: no report (convergence_minima = 1)" in part.output
    ends = [line.rstrip().rsplit("  ", 1)[-1] for line in part.output.splitlines()]
    assert (ends.count("ok"), ends.count("unchecked")) == (1, 2)
    full = invoke(cfg, "--out", tmp_path / "part", "--set", "evidence.convergence_minima=0")
    assert full.exit_code == 0, full.output
    f = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert all(r["converged"] is not None for r in f["rows"])
    assert f["rows"][0]["convergence"] == s["rows"][0]["convergence"]
    assert [r["log_integral"] for r in f["rows"]] == [r["log_integral"] for r in s["rows"]]


def test_loaded_minima(tmp_path):
    rows = np.array([[0.01, -0.02, 0.03], [0.2, 0.1, -0.1]])
    np.save(tmp_path / "minima.npy", rows)
    body = ("[evidence]\nn_minima = 2\nlaplace = false\n[data]\nname = 'none'\n" + TI_FAST
            + f"[model.A]\narchitecture = 'gaussian'\nn = 3\nparams = "
              f"'{tmp_path / 'minima.npy'}'\n")
    res = invoke(write(tmp_path, body), "--out", tmp_path / "o", "--no-convergence")
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    for j, r in enumerate(s["rows"]):
        assert r["energy0"] == pytest.approx(0.5 * np.sum(rows[j] ** 2), rel=1e-12)
        assert "minima.npy row" in r["minimum_info"]["source"]
        assert np.array_equal(np.load(tmp_path / "o" / "minima" / "A" / f"min{j:03d}.npy"),
                              rows[j])


# --- the flag -------------------------------------------------------------------------------

def test_an_unconverged_estimate_is_flagged_not_printed_clean(tmp_path):
    """TI far too short for a potential with stiffnesses from 1e-2 to 1e4: the variants
    disagree far beyond their errors, and the command must say so (exit status 3)."""
    k = [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 0.01, 0.1, 1, 10,
         100, 1000, 10000]
    body = (f"[evidence]\nseed = 1\nlaplace = false\n[data]\nname = 'none'\n"
            f"[ti]\nn_bridges = 4\nn_burn_in = 0\nn_samples = 10\nn_leapfrog = 2\n"
            f"kfit_burn_in = 0\nkfit_samples = 3\ninitial_burn_in = 0\n"
            f"[model.S]\narchitecture = 'gaussian'\nn = 20\nstiffness = {k}\n"
            f"prior_scale = 100.0\n")
    res = invoke(write(tmp_path, body), "--out", tmp_path / "o")
    assert res.exit_code == evrun.EXIT_NOT_CONVERGED, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    (row,) = s["rows"]
    # it really is wrong: far from the exact value by its own error bar (or without one)
    exact = sum(0.5 * math.log(2 * math.pi / kk) + math.log(math.erf(50 * math.sqrt(kk / 2)))
                for kk in k)
    err = row["log_integral_error"]
    assert not math.isfinite(err) or abs(row["log_integral"] - exact) > 5 * err
    assert row["converged"] is False and s["converged"] is False and row["failed"]
    bad = [v for v in row["convergence"]["variants"] if not v["passed"]]
    for v in bad:        # beyond the bound, or runs without finite estimates and error bars
        finite = all(math.isfinite(x) for x in (
            v["log_integral"], v["log_integral_error"],
            row["convergence"]["baseline"]["log_integral_error"]))
        assert not finite or abs(v["delta"]) >= v["allowed"], v
    assert any(math.isfinite(v["delta"]) and abs(v["delta"]) > v["allowed"] for v in bad)
    line = next(ln for ln in res.output.splitlines() if ln.startswith("S "))
    assert "NOT CONVERGED" in line and " !" in line
    assert "Do not use them as clean numbers" in res.output


def test_table_flags_every_failed_row_and_the_bayes_factor():
    def row(model, converged):
        return {"model": model, "minimum": 0, "n_params": 3, "energy0": 0.0,
                "log_integral": 1.0, "log_integral_error": 0.1, "log_volume": 2.0,
                "log_evidence": -1.0, "log_evidence_error": 0.1, "laplace_log_evidence": None,
                "converged": converged, "failed": [] if converged else ["reverse"]}

    summary = {"temperature": 1.0, "repeats": 1, "data": "none", "method": "converged",
               "rows": [row("A", True), row("B", False)],
               "models": [], "convergence_checked": True, "converged": False,
               "bayes_factors": evrun.bayes_factors([row("A", True), row("B", False)],
                                                     ["A", "B"])}
    text = evrun.format_table(summary)
    a_line = next(ln for ln in text.splitlines() if ln.startswith("A "))
    b_line = next(ln for ln in text.splitlines() if ln.startswith("B "))
    assert a_line.endswith("ok") and "!" not in a_line
    assert b_line.endswith("NOT CONVERGED (reverse)") and "-1.00 ± 0.10 !" in b_line
    bf = next(ln for ln in text.splitlines() if ln.startswith("ln[p(B|D)/p(A|D)]"))
    assert bf.endswith("NOT CONVERGED")


def test_docs_name_every_config_key():
    """docs/evidence.md documents every key of every section (docs true to the code)."""
    import dataclasses

    from thermonet.evidence.ti.integration import TIConfig

    text = (SAMPLE_RUNS.parent / "docs" / "evidence.md").read_text()
    ref = text[text.index("## Configuration reference"):]
    keys = [*evcfg.EVIDENCE_KEYS, *evcfg.DATA_KEYS, *evcfg.LAPLACE_KEYS, *evcfg.MODEL_KEYS,
            *(f.name for f in dataclasses.fields(TIConfig) if f.name != "temperature")]
    missing = [k for k in keys if f"`{k}`" not in ref]
    assert not missing, missing



def test_the_papers_recipe_is_reachable_from_the_config(tmp_path):
    body = ("[evidence]\nlaplace = false\n[data]\nname = 'none'\n" + TI_FAST
            + GAUSSIAN_MODELS.split("[model.B]")[0])
    res = invoke(write(tmp_path, body), "--out", tmp_path / "o", "--no-convergence",
                 "--set", "ti.method=paper")
    assert res.exit_code == 0, res.output
    d = json.loads((tmp_path / "o/ti/A/min000/rep000/result.json").read_text())["details"]
    assert d["config"]["method"] == "paper"
    assert (d["config"]["reference"], d["config"]["wall"], d["f0"]) == (
        "free", "endpoint", "centred")
    assert "TI method paper" in res.output
    stored = (tmp_path / "o" / "evidence.toml").read_text()
    assert 'method = "paper"  # set' in stored


class _OneThreadAtATime:
    """A potential that notices when two threads use the same object at once (as a network's
    potential, whose scratch space is per object, must never be)."""

    def __init__(self, base):
        self.base, self.n_params = base, base.n_params
        self.busy = False
        self.clash = False

    def copy(self):
        return _OneThreadAtATime(self.base)

    def energy(self, theta):
        import time

        if self.busy:
            self.clash = True
        self.busy = True
        time.sleep(0.05)
        self.busy = False
        return self.base.energy(theta)


def test_stored_minima_are_checked_on_per_thread_copies(tmp_path, monkeypatch):
    body = ("[evidence]\nn_minima = 2\nworkers = 2\nlaplace = false\n[data]\nname = 'none'\n"
            + TI_FAST + GAUSSIAN_MODELS.split("[model.B]")[0])
    cfg_path = write(tmp_path, body)
    first = invoke(cfg_path, "--out", tmp_path / "o", "--no-convergence")
    assert first.exit_code == 0, first.output
    shared = []
    real = evrun.build_models

    def wrapped(cfg):
        models = real(cfg)
        for m in models:
            m.potential = _OneThreadAtATime(m.potential)
            shared.append(m.potential)
        return models

    monkeypatch.setattr(evrun, "build_models", wrapped)
    cfg = evcfg.load(cfg_path, commandline={"evidence.convergence": False})
    summary = evrun.run_evidence(cfg, tmp_path / "o", quiet=True)
    assert shared and not any(p.clash for p in shared)
    assert numbers(summary) == numbers(json.loads((tmp_path / "o" / "summary.json").read_text()))



def test_rerun_with_workers_on_a_network(tmp_path):
    """A small network on D50 with two workers: re-running a finished directory recomputes
    E at the stored minima and gives back the same table."""
    body = ("[evidence]\nn_minima = 2\nworkers = 2\nlaplace = false\n[data]\nname = 'D50'\n"
            "[minimiser]\nmax_steps = 300\n"
            "[ti]\nn_bridges = 2\nn_burn_in = 2\nn_samples = 4\nn_leapfrog = 5\n"
            "kfit_burn_in = 4\nkfit_samples = 4\ninitial_burn_in = 3\n"
            "[model.small]\narchitecture = 'mlp'\nhidden = [4]\n")
    cfg = write(tmp_path, body)
    first = invoke(cfg, "--out", tmp_path / "o", "--no-convergence")
    assert first.exit_code == 0, first.output
    assert "small      0" in first.output and "small      1" in first.output
    again = invoke(cfg, "--out", tmp_path / "o", "--no-convergence")
    assert again.exit_code == 0, again.output
    assert again.output == first.output


def test_temperature_reaches_ti_and_laplace(tmp_path):
    """At T = 2 the box integral of exp(-E/T) of a Gaussian well is exact in closed form."""
    body = ("[evidence]\nseed = 4\ntemperature = 2.0\n[data]\nname = 'none'\n" + TI_FAST
            + GAUSSIAN_MODELS.split("[model.B]")[0])
    res = invoke(write(tmp_path, body), "--out", tmp_path / "o", "--no-convergence")
    assert res.exit_code == 0, res.output
    (row,) = json.loads((tmp_path / "o" / "summary.json").read_text())["rows"]
    t, k, a = 2.0, 1.0, 5.0
    exact = 3 * math.log(math.sqrt(2 * math.pi * t / k) * math.erf(a * math.sqrt(k / (2 * t))))
    assert abs(row["log_integral"] - exact) < 4 * row["log_integral_error"]
    assert row["laplace"]["temperature"] == 2.0
    assert row["laplace"]["log_integral"] == pytest.approx(exact, abs=2e-3)
    assert "note: at T != 1" in res.output


MACKAY_CONFIG = """
[evidence]
seed = 7
method = "mackay"
[data]
name = "D50"
[mackay]
restarts = 1
max_iter = 2
[model.small]
architecture = "mlp"
hidden = [2]
"""


@pytest.mark.slow
def test_evidence_method_mackay_is_macKays_framework_on_each_model(tmp_path):
    """`thermonet evidence` with method = "mackay" gives, for each model of the config, the
    numbers of MacKay's classification framework called directly with the same settings
    and seeds (compare_classifiers, as `thermonet mackay --arch` does)."""
    from thermonet.architectures.mlp import MLP
    from thermonet.evidence.mackay.models import compare_classifiers

    cfg = tmp_path / "mk.toml"
    cfg.write_text(MACKAY_CONFIG)
    res = CliRunner().invoke(main, ["evidence", str(cfg), "--out", str(tmp_path / "o"),
                                    "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    direct = compare_classifiers([("small", MLP(hidden=[2]))], "D50", 1, seed=7,
                                 max_iter=2, tol=1e-4, newton_steps=0,
                                 curvature="gauss-newton")
    assert len(rows) == 1 and rows[0]["model"] == "small"
    assert rows[0]["log_evidence"] == direct[0].log_evidence
    assert rows[0]["alpha"] == direct[0].alpha
    stored = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert stored["rows"][0]["log_evidence"] == direct[0].log_evidence
    table = CliRunner().invoke(main, ["evidence", str(cfg), "--out", str(tmp_path / "o"),
                                      "--quiet"])
    assert table.exit_code == 0 and "best evidence: small" in table.output


@pytest.mark.parametrize("text,expected", [
    ('[evidence]\nmethod = "laplace"\n[model.a]\narchitecture = "M1"\n',
     "evidence.method = 'laplace'"),
    ('[evidence]\nmethod = "mackay"\n[mackay]\ngroups = "units"\n[model.a]\narchitecture = "M1"\n',
     "mackay.groups = 'units'"),
])
def test_mackay_method_settings_are_checked(text, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        evcfg.resolve(evcfg.cfgmod.parse_toml(text))
    assert "\n" not in str(err.value)
