"""Classifiers compared by MacKay's evidence (``thermonet mackay --arch``): each row is the
framework's result for its seeded start, its errors are those of w_MP, and bad input is one
line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet.cli import main
from thermonet.data import load_data
from thermonet.errors import ConfigError
from thermonet.evidence.mackay.classify import mackay_classifier
from thermonet.evidence.mackay.models import (
    compare_classifiers,
    format_classifiers,
    layer_groups,
)
from thermonet.registry import get_architecture


def _small():
    return get_architecture("mlp", n_inputs=256, hidden=[2], n_outputs=10)


def test_layer_groups_cover_every_parameter_once():
    arch = get_architecture("M3")
    for grouping, n in (("layer", 4), ("weights-biases", 8)):
        groups = layer_groups(arch, grouping)
        assert len(groups) == n
        idx = np.concatenate([np.arange(arch.n_params)[g] if isinstance(g, slice)
                              else np.asarray(g) for g in groups.values()])
        assert np.array_equal(np.sort(idx), np.arange(arch.n_params))
    with pytest.raises(ConfigError, match="expected one of"):
        layer_groups(arch, "units")


@pytest.mark.slow
def test_a_row_is_the_framework_at_its_seeded_start_with_the_errors_of_w_mp():
    import zlib

    arch = _small()
    opts = {"max_iter": 3, "tol": 1e-3, "lbfgs_iter": 300, "newton_steps": 1}
    (row,) = compare_classifiers([arch], "D50", 1, seed=3, **opts)
    start = int(np.random.SeedSequence([3, zlib.crc32(b"mlp"), 0]).generate_state(1)[0])
    split = load_data("D50", test="official")
    res = mackay_classifier(arch, split.train, seed=start, groups=layer_groups(arch),
                            **opts)
    assert row.log_evidence == res.log_evidence and row.n_iter == res.n_iter
    assert row.log_evidence == pytest.approx(row.log_likelihood + row.log_occam_w
                                             + row.log_occam_hyper + row.log_symmetry)
    assert sum(row.gamma_groups) == pytest.approx(row.gamma)
    assert row.log_symmetry == pytest.approx(math.log(2))         # 2! logistic units
    # errors of w_MP from an independent forward pass
    logits = np.asarray(arch.potential(split.test).logits(res.theta, None))
    assert row.test_error == pytest.approx(np.mean(np.argmax(logits, 1) != split.test.y))
    z = logits - logits.max(1, keepdims=True)
    nll = -np.mean(z[np.arange(len(split.test.y)), split.test.y]
                   - np.log(np.exp(z).sum(1)))
    assert row.test_nll == pytest.approx(nll, rel=1e-12)
    assert row.factorisation == "eigh"
    header, line = format_classifiers([row]).splitlines()
    assert header.split()[:3] == ["model", "restart", "log"]
    assert line.split()[:3] == ["mlp", "0", f"{row.log_evidence:.2f}"]
    assert line.split()[-1] == ("yes" if row.converged else "no")


def test_bad_input_is_one_line():
    for args in (["mackay", "--arch", " , "], ["mackay", "--arch", "M7"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in res.output, res.output
    with pytest.raises(ConfigError, match="positive integer"):
        compare_classifiers(["M1"], "D50", 0)


def test_the_command_prints_progress_the_table_and_keeps_the_rows(tmp_path, monkeypatch):
    import json

    import thermonet.evidence.mackay.factorised as factorised
    import thermonet.evidence.mackay.level1 as level1
    import thermonet.registry as registry

    # the large-network path (L-BFGS, Cholesky) on a small network: fast, and what M1 runs
    monkeypatch.setattr(factorised, "EIGH_MAX", 100)
    monkeypatch.setattr(level1, "EIGH_MAX", 100)
    small = _small()
    real = registry.get_architecture
    monkeypatch.setattr(registry, "get_architecture",
                        lambda name, **kw: small if name == "M1" else real(name, **kw))
    out = tmp_path / "rows.json"
    res = CliRunner().invoke(main, ["mackay", "--arch", "M1", "--data", "D50", "--restarts",
                                    "1", "--max-iter", "2", "--tol", "1e-3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "cycle 1: alpha " in res.output and "M1 restart 0: log evidence" in res.output
    saved = json.loads(out.read_text())
    (row,) = saved["rows"]
    assert saved["curvature"] == "gauss-newton" and saved["arch"] == ["M1"]
    assert row["model"] == "M1" and row["n_params"] == small.n_params
    assert row["factorisation"] == "cholesky" and row["n_iter"] <= 2
    assert f"best evidence: M1 (restart 0), log evidence {row['log_evidence']:.2f}" in res.output
