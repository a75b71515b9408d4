"""The summary of an evidence calculation: Bayes factors, files and printed tables."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.evidence.basins.census import describe as describe_census
from thermonet.evidence.basins.census import model_census
from thermonet.io.atomic import write_h5, write_json, write_text
from thermonet.io.h5 import write_header
from thermonet.io.jsonable import json_default

SUMMARY_FORMAT = "thermonet.evidence"
SUMMARY_VERSION = 1


def between_minima(name: str, rows: list[dict[str, Any]],
                   settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """How much the log evidence moves between minima of one model; with the model's
    settings, also its census (:func:`thermonet.evidence.basins.census.model_census`)."""
    le = np.array([r["log_evidence"] for r in rows])
    out: dict[str, Any] = {"model": name, "n_minima": len(rows)}
    if settings is not None:
        out["census"] = model_census(settings, rows)
    if len(rows) >= 2:
        out.update(mean=float(le.mean()), sd=float(le.std(ddof=1)),
                   min=float(le.min()), max=float(le.max()),
                   range=float(le.max() - le.min()))
    else:
        out.update(mean=float(le[0]), sd=math.nan, min=float(le[0]), max=float(le[0]),
                   range=0.0)
    return out


def bayes_factors(rows: list[dict[str, Any]], names: list[str],
                  models: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """ln[p(B|D)/p(A|D)] for every model B against the first model A, at minimum 0 of each
    (TI and Laplace), and from the means over minima with the between-minima spread; with
    both symmetry multiplicities known, also the basin-plus-copies ratio ``ti_with_copies``
    (TI + ln|G_B| - ln|G_A|) and whether both minima passed the genericity check; with the
    models' censuses (``models[i]["census"]``), the difference of their bounds
    (``census``) and, when both have a global estimate, of those (``global``)."""
    cens = {m["model"]: m.get("census") for m in models or []}
    by = {(r["model"], r["minimum"]): r for r in rows}
    out: list[dict[str, Any]] = []
    if len(names) < 2:
        return out
    a = names[0]
    for b in names[1:]:
        ra, rb = by[(a, 0)], by[(b, 0)]
        f = {"numerator": b, "denominator": a,
             "ti": rb["log_evidence"] - ra["log_evidence"],
             "ti_error": math.hypot(ra["log_evidence_error"], rb["log_evidence_error"]),
             "converged": (None if ra["converged"] is None and rb["converged"] is None
                           else bool(ra["converged"] is not False
                                     and rb["converged"] is not False)),
             "laplace": (rb["laplace_log_evidence"] - ra["laplace_log_evidence"]
                         if ra["laplace_log_evidence"] is not None
                         and rb["laplace_log_evidence"] is not None else None)}
        ga, gb = ra.get("log_multiplicity"), rb.get("log_multiplicity")
        if ga is not None and gb is not None:
            f["log_multiplicity"] = gb - ga
            f["ti_with_copies"] = f["ti"] + gb - ga
            f["generic"] = not (ra.get("symmetry_violations") or rb.get("symmetry_violations"))
        ca, cb = cens.get(a), cens.get(b)
        if ca and cb:
            f["census"] = cb["bound"] - ca["bound"]
            f["census_error"] = math.hypot(ca["bound_error"], cb["bound_error"])
            if ca["global_log_evidence"] is not None and cb["global_log_evidence"] is not None:
                f["global"] = cb["global_log_evidence"] - ca["global_log_evidence"]
                f["global_error"] = math.hypot(ca["global_error"], cb["global_error"])
        ma = [r["log_evidence"] for r in rows if r["model"] == a]
        mb = [r["log_evidence"] for r in rows if r["model"] == b]
        if len(ma) >= 2 and len(mb) >= 2:
            f["ti_over_minima"] = float(np.mean(mb) - np.mean(ma))
            f["ti_over_minima_sd"] = float(math.hypot(np.std(ma, ddof=1), np.std(mb, ddof=1)))
        out.append(f)
    return out


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """summary.json, summary.h5 and table.txt, each written atomically."""
    write_json(out / "summary.json", summary)
    write_text(out / "table.txt",
               format_table(summary) + "\n\n" + format_convergence(summary) + "\n")
    write_h5_summary(out / "summary.h5", summary)


def write_h5_summary(path: Path, summary: dict[str, Any]) -> None:
    """summary.h5: the summary's numbers as datasets under ``model/<name>/minNNN``, and the
    whole summary as JSON in a root attribute."""
    def fill(fh: Any) -> None:
        write_header(fh, SUMMARY_FORMAT, SUMMARY_VERSION,
                     summary_json=json.dumps(summary, default=json_default, allow_nan=True))
        for r in summary["rows"]:
            g = fh.create_group(f"model/{r['model']}/min{r['minimum']:03d}")
            for key in ("n_params", "energy0", "log_volume", "log_integral",
                        "log_integral_error", "log_evidence", "log_evidence_error"):
                g.attrs[key] = r[key]
            if r.get("log_multiplicity") is not None:
                g.attrs["log_multiplicity"] = r["log_multiplicity"]
                g.attrs["symmetry_generic"] = not r.get("symmetry_violations")
            if r["laplace_log_evidence"] is not None:
                g.attrs["laplace_log_evidence"] = r["laplace_log_evidence"]
                g.attrs["laplace_log_integral"] = r["laplace"]["log_integral"]
            g.attrs["converged"] = ("unchecked" if r["converged"] is None
                                    else "yes" if r["converged"] else "NO")
            g["repeat_log_integral"] = np.array([x["log_integral"] for x in r["repeats"]])
            g["repeat_log_integral_error"] = np.array([x["log_integral_error"]
                                                       for x in r["repeats"]])
            g["repeat_seed"] = np.array([x["seed"] for x in r["repeats"]], dtype=np.int64)
            for key, value in (r.get("ti_details") or {}).items():
                arr = _numeric(value)
                if arr is not None:
                    g.create_dataset(f"ti_details/{key}", data=arr)
            if r["convergence"]:
                vs = r["convergence"]["variants"]
                c = g.create_group("convergence")
                c["variant"] = np.array([v["variant"] for v in vs], dtype="S")
                for key in ("log_integral", "log_integral_error", "delta", "allowed"):
                    c[key] = np.array([v[key] for v in vs], dtype=np.float64)
                c["passed"] = np.array([v["passed"] for v in vs], dtype=bool)
        for m in summary["models"]:
            cen = m.get("census")
            if cen:
                g = fh.require_group(f"model/{m['model']}")
                for key in ("bound", "bound_error", "n_basins", "n_minima", "fraction",
                            "fraction_error", "global_log_evidence", "global_error"):
                    if cen.get(key) is not None:
                        g.attrs[f"census_{key}"] = cen[key]
                g["census_group"] = np.asarray(cen["groups"], dtype=np.int64)

    write_h5(path, fill)


def _numeric(value: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        return None
    if arr.dtype.kind in "fiub" and arr.size > 0:
        return arr
    return None


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def _decimals(err: float) -> int:
    if not math.isfinite(err) or err <= 0:
        return 2
    return int(min(6, max(0, 1 - math.floor(math.log10(err)))))


def pm(value: float, err: float) -> str:
    """``value ± err`` with as many decimals as the error supports."""
    if not math.isfinite(value):
        return str(value)
    d = _decimals(err)
    e = "nan" if not math.isfinite(err) else f"{err:.{d}f}"
    return f"{value:.{d}f} ± {e}"


def _status(row: dict[str, Any]) -> str:
    if row["converged"] is None:
        return "unchecked"
    if row["converged"]:
        return "ok"
    return "NOT CONVERGED (" + ", ".join(row["failed"]) + ")"


def format_table(summary: dict[str, Any]) -> str:
    """The model table and the log Bayes factors, as printed by ``thermonet evidence``."""
    lines = []
    t = summary["temperature"]
    spread = "mean ± sd of" if summary["repeats"] >= 2 else "one run of"
    lines.append(f"evidence on {summary['data']}, T = {t:g}, TI method {summary['method']}; "
                 f"TI: {spread} {summary['repeats']} run(s) per minimum")
    if t != 1.0:
        lines.append("note: at T != 1 'log evidence' is log ∫ e^(-E/T) - log ∏σ, not p(D|M)")
    head = (f"{'model':<8} {'min':>3} {'d':>7} {'E(w0)':>10} {'log ∫ (TI)':>22} "
            f"{'log ∏σ':>11} {'log evidence (TI)':>22} {'ln|G|':>8} {'Laplace':>11} "
            f"{'Lap-TI':>9}  check")
    lines.append(head)
    lines.append("-" * len(head))
    for r in summary["rows"]:
        flag = "" if r["converged"] is not False else " !"
        lap = r["laplace_log_evidence"]
        lap_s = f"{lap:.2f}" if lap is not None else "-"
        dl = f"{lap - r['log_evidence']:+.2f}" if lap is not None else "-"
        g = r.get("log_multiplicity")
        g_s = "-" if g is None else f"{g:.2f}" + ("*" if r.get("symmetry_violations") else "")
        lines.append(
            f"{r['model']:<8} {r['minimum']:>3} {r['n_params']:>7} {r['energy0']:>10.3g} "
            f"{pm(r['log_integral'], r['log_integral_error']) + flag:>22} "
            f"{r['log_volume']:>11.2f} "
            f"{pm(r['log_evidence'], r['log_evidence_error']) + flag:>22} {g_s:>8} "
            f"{lap_s:>11} {dl:>9}  {_status(r)}")
    lines.extend(_symmetry_lines(summary["rows"]))
    lines.extend(_direction_lines(summary["rows"]))
    for m in summary["models"]:
        if m["n_minima"] >= 2:
            lines.append(f"between the {m['n_minima']} minima of {m['model']}: log evidence "
                         f"mean {m['mean']:.2f}, sd {m['sd']:.2f}, range {m['range']:.2f} "
                         f"({m['min']:.2f} to {m['max']:.2f})")
    for m in summary["models"]:
        if m.get("census"):
            lines.extend(describe_census(m["model"], m["census"]))
    for f in summary["bayes_factors"]:
        b, a = f["numerator"], f["denominator"]
        mark = ("" if f["converged"] else "   NOT CONVERGED" if f["converged"] is False
                else "   (unchecked: no convergence report)")
        lap = f"; Laplace {f['laplace']:.2f}" if f["laplace"] is not None else ""
        lines.append(f"ln[p({b}|D)/p({a}|D)] = {pm(f['ti'], f['ti_error'])} "
                     f"(TI, minimum 0 of each{lap}){mark}")
        if "ti_with_copies" in f:
            note = ("" if f["generic"] else "; a minimum 0 failed the genericity check (*), "
                    "so its copies may coincide")
            lines.append(f"ln[p({b}|D)/p({a}|D)] basin + copies = "
                         f"{pm(f['ti_with_copies'], f['ti_error'])} (TI above "
                         f"{f['log_multiplicity']:+.2f} from ln|G|: each basin's evidence "
                         f"times its number of exact copies{note})")
        if "census" in f:
            lines.append(f"ln[p({b}|D)/p({a}|D)] census = {pm(f['census'], f['census_error'])} "
                         "(difference of the census bounds: each model's distinct basins found "
                         "with their copies; a difference of lower bounds, not a bound)")
        if "global" in f:
            lines.append(f"ln[p({b}|D)/p({a}|D)] global = {pm(f['global'], f['global_error'])} "
                         "(prior-anchored ladders: the models' evidences, if both mixed)")
        if "ti_over_minima" in f:
            lines.append(f"ln[p({b}|D)/p({a}|D)] over minima = {f['ti_over_minima']:.2f} ± "
                         f"{f['ti_over_minima_sd']:.2f} (mean ± between-minima sd)")
    if summary["convergence_checked"] and not summary["converged"]:
        lines.append("NOT CONVERGED: estimates marked ! disagree with a convergence variant "
                     "beyond the tolerance; see the convergence report. Do not use them as "
                     "clean numbers.")
    return "\n".join(lines)


def _direction_lines(rows: list[dict[str, Any]]) -> list[str]:
    """For TI run both ways (``ti.both_directions``): each model's hysteresis between the
    sweeps, and every minimum whose reverse sweep lies above its forward one beyond the
    errors (against the second law)."""
    out: list[str] = []
    for model in dict.fromkeys(r["model"] for r in rows):
        two = [r["ti_details"] for r in rows
               if r["model"] == model and (r.get("ti_details") or {}).get("both_directions")]
        if not two:
            continue
        h = np.array([d["hysteresis"] for d in two])
        fwd = np.array([d["forward_log_integral"] for d in two])
        rev = np.array([d["reverse_log_integral"] for d in two])
        if h.size >= 2:
            se = float(h.std(ddof=1)) / math.sqrt(h.size)
            out.append(f"both directions, {model}: hysteresis H = forward - reverse = "
                       f"{pm(float(h.mean()), se)} over {h.size} minima (positive at "
                       f"{int(np.sum(h > 0))}); log ∫ forward {fwd.mean():.2f}, reverse "
                       f"{rev.mean():.2f} on average; the table gives each midpoint, its error "
                       "including the dissipation sqrt(H/2)")
        else:
            out.append(f"both directions, {model}: hysteresis H = forward - reverse = "
                       f"{pm(float(h[0]), float(two[0]['hysteresis_error']))} (forward "
                       f"{fwd[0]:.2f}, reverse {rev[0]:.2f}); the table gives the midpoint, its "
                       "error including the dissipation sqrt(H/2)")
        bad = [r["minimum"] for r in rows if r["model"] == model
               and (r.get("ti_details") or {}).get("hysteresis_inverted")]
        if bad:
            out.append(f"  REVERSE ABOVE FORWARD at minimum/minima {', '.join(map(str, bad))} of "
                       f"{model}, against the second law: another error dominates there")
    return out


def _symmetry_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The footnote of the ln|G| column: each model's formula, and every minimum that may be
    a fixed point of a symmetry."""
    out: list[str] = []
    seen: dict[str, str] = {}
    for r in rows:
        if r.get("log_multiplicity") is not None and r["model"] not in seen:
            seen[r["model"]] = f"{r['model']} {r['multiplicity_formula']}"
    if seen:
        out.append("ln|G|: log number of exact copies of a basin (hidden-unit permutations, "
                   "and sign flips of tanh units): " + ", ".join(seen.values()))
    for r in rows:
        viol = r.get("symmetry_violations")
        if viol:
            more = f" (and {len(viol) - 1} more)" if len(viol) > 1 else ""
            out.append(f"* minimum {r['minimum']} of {r['model']} may be fixed by a symmetry, "
                       f"so its copies may coincide: {viol[0]}{more}")
    return out


def format_convergence(summary: dict[str, Any]) -> str:
    """The convergence report table."""
    if not summary["convergence_checked"]:
        return ("convergence report: not run (--no-convergence); the numbers above are "
                "unchecked")
    tol = summary["tolerance"]
    lines = [(f"convergence report: each variant must agree with the baseline TI run "
             f"(repeat 0): |Δ| < {tol:g}·sqrt(σ_base² + σ_variant²)")]
    head = (f"{'model':<8} {'min':>3} {'variant':<22} {'log ∫':>22} {'Δ':>10} "
            f"{'allowed':>9}  agrees")
    lines.append(head)
    lines.append("-" * len(head))
    for r in summary["rows"]:
        c = r["convergence"]
        if c is None:
            continue
        b = c["baseline"]
        lines.append(f"{r['model']:<8} {r['minimum']:>3} {'baseline':<22} "
                     f"{pm(b['log_integral'], b['log_integral_error']):>22}")
        for v in c["variants"]:
            lines.append(f"{r['model']:<8} {r['minimum']:>3} {v['description']:<22} "
                         f"{pm(v['log_integral'], v['log_integral_error']):>22} "
                         f"{v['delta']:>+10.3g} {v['allowed']:>9.3g}  "
                         f"{'yes' if v['passed'] else 'NO'}")
    k = summary.get("convergence_minima") or 0
    if k and summary["n_minima"] > k:
        lines.append(f"minima {k}-{summary['n_minima'] - 1} of each model: no report "
                     f"(convergence_minima = {k}); they ran at the settings checked above")
    return "\n".join(lines)
