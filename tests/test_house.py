"""The house rules that a linter does not check: private names stay private, compiled code
lives in kernels/, modules hold one idea (<= 500 lines), importing changes no global state."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "thermonet"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
MAX_LINES = 500


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _private_imports(path: Path) -> list[str]:
    """``from thermonet.x import _y`` and ``import thermonet.x._y`` across module boundaries.

    A package's own private submodules (``thermonet.data._mnist`` imported inside
    ``thermonet.data``) are the package's business; importing them from elsewhere is not.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("thermonet"):
            target = node.module
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            target, names = "", [a.name for a in node.names if a.name.startswith("thermonet")]
        else:
            continue
        for name in names:
            full = f"{target}.{name}" if target else name
            parts = full.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if not (package == owner or package.startswith(owner + ".")):
                        found.append(f"{here} imports {full}")
                    break
    return found


def test_no_module_imports_another_modules_private_names():
    offences = [o for path in MODULES for o in _private_imports(path)]
    assert offences == []


def test_compiled_code_lives_in_kernels():
    outside = []
    for path in MODULES:
        if "kernels" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(m == "numba" or m.startswith("numba.") or m.endswith("kernels.jit.kernel")
                   or m == "thermonet.kernels.kernel" for m in mods):
                outside.append(_module_name(path))
    assert outside == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_hold_one_idea(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.name} has {n} lines; split it (one idea per module)"


def test_importing_thermonet_changes_no_environment_variable():
    code = ("import os; before = dict(os.environ); import thermonet, thermonet.runner, "
            "thermonet.kernels.mlp, thermonet.kernels.threads, thermonet.registry; "
            "print(sorted(set(os.environ.items()) ^ set(before.items())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"
