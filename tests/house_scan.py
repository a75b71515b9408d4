"""Scans of the source tree for tests/test_house.py: the import graph and its circles, long
functions, repeated code and the module map of docs/architecture.md. Standard library only
(the [test] extra installs nothing more for them)."""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "thermonet"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def relative(path: Path) -> str:
    """``evidence/ti/sweep.py``: the path below thermonet/."""
    return path.relative_to(PACKAGE).as_posix()


# --- imports --------------------------------------------------------------------------------

def import_graph() -> dict[str, set[str]]:
    """Module -> the thermonet modules it imports, at module level or inside a function
    (``from a.b import c`` counts as importing ``a.b.c`` when that is a module, else ``a.b``)."""
    paths = modules()
    names = {module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        here = module_name(path)
        package = here if path.name == "__init__.py" else here.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    found.add(full if full in names else base)
        graph[here] = {m for m in found if m in names and m != here}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


# --- functions ------------------------------------------------------------------------------

def long_functions(limit: int) -> list[tuple[str, str, int]]:
    """(path below thermonet/, qualified name, lines) of every function or method whose
    ``def`` through the last line of its body spans more than ``limit`` lines."""
    found = []
    for path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def walk(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = (child.end_lineno or child.lineno) - child.lineno + 1
                    if n > limit:
                        found.append((relative(path), prefix + child.name, n))
                    walk(child, prefix + child.name + ".")
                elif isinstance(child, ast.ClassDef):
                    walk(child, prefix + child.name + ".")
                else:
                    walk(child, prefix)

        walk(tree, "")
    return found


# --- repeated code --------------------------------------------------------------------------

_PUNCT = re.compile(r"^[\s()\[\]{},:;.]*$")


def shape_lines(text: str) -> list[tuple[int, str]]:
    """The lines that count, each as (line number, shape): names, strings and numbers replaced
    by placeholders, keywords and operators kept. Blank lines, comments, import lines and
    lines of lone punctuation are left out; a string over several lines is one line. So are a
    class body's field declarations (``name: type`` or ``name: type = default``): a record's
    fields are its data contract, and two records with fields of the same shape share no
    logic that a function could hold."""
    rows: dict[int, list[str]] = defaultdict(list)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    fstring_start = getattr(tokenize, "FSTRING_START", None)     # Python >= 3.12
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    depth = 0
    for tok in tokens:
        if fstring_start is not None and tok.type == fstring_start:
            if depth == 0:
                rows[tok.start[0]].append("S")
            depth += 1
            continue
        if depth:                   # an f-string is one string, as before Python 3.12
            depth -= tok.type == fstring_end
            continue
        if tok.type == tokenize.NAME:
            shape = tok.string if keyword.iskeyword(tok.string) else "N"
        elif tok.type == tokenize.STRING:
            shape = "S"
        elif tok.type == tokenize.NUMBER:
            shape = "0"
        elif tok.type == tokenize.OP:
            shape = tok.string
        else:
            continue
        rows[tok.start[0]].append(shape)
    skip: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, ast.ClassDef):
            for field in node.body:
                if isinstance(field, ast.AnnAssign):
                    skip.update(range(field.lineno, (field.end_lineno or field.lineno) + 1))
    out = []
    for line, shapes in sorted(rows.items()):
        joined = " ".join(shapes)
        if line in skip or shapes == ["S"] or _PUNCT.match(joined.replace(" ", "")):
            continue        # imports, docstrings, lone punctuation
        if len([s for s in shapes if not _PUNCT.match(s)]) <= 2:
            continue        # thin lines: `N ,`, `return N`, `else :`
        out.append((line, joined))
    return out


def repeated_runs(paths: Iterable[Path], min_lines: int = 6, max_places: int = 8
                  ) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Pairs of files (a file with itself too) that share a run of ``min_lines`` or more
    same-shape lines, each with the first lines of the runs it shares. A run that stands in
    more than ``max_places`` places is too common to count (boilerplate)."""
    places: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for path in paths:
        lines = shape_lines(path.read_text(encoding="utf-8"))
        name = relative(path)
        for i in range(len(lines) - min_lines + 1):
            key = "\n".join(s for _, s in lines[i:i + min_lines])
            places[key].append((name, i, lines[i][0]))
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for where in places.values():
        if len(where) < 2 or len(where) > max_places:
            continue
        for (fa, ia, la), (fb, ib, lb) in combinations(where, 2):
            if fa == fb and abs(ia - ib) < min_lines:
                continue          # overlapping windows of one run
            key = (fa, fb) if (fa, la) <= (fb, lb) else (fb, fa)
            pairs[key].append((la, lb) if key == (fa, fb) else (lb, la))
    return dict(pairs)


# --- the module map -------------------------------------------------------------------------

def mapped_modules(doc: Path) -> set[str]:
    """The modules the map of docs/architecture.md names ("What lives where"), as paths below
    thermonet/. In the map a line whose first word ends in ``/`` opens that folder (relative to
    the folder opened at a smaller indent); each ``name.py`` after it is a module of the
    folder open at that point, and a folder names its ``__init__.py``."""
    text = doc.read_text(encoding="utf-8")
    start = text.index("## What lives where")
    block = text[text.index("```", start) + 3:]
    block = block[block.index("\n") + 1:block.index("```")]
    found: set[str] = set()
    opened: list[tuple[int, str]] = []       # (indent, folder) of the open folders
    for raw in block.splitlines():
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip())
        words = raw.split()
        first = words[0]
        if first == "thermonet/":
            continue
        if indent <= 2 or first.endswith("/") or re.fullmatch(r"[\w/]+\.py", first):
            while opened and opened[-1][0] >= indent:
                opened.pop()
        if first.endswith("/"):
            parent = opened[-1][1] if opened else ""
            opened.append((indent, parent + first))
            found.add(parent + first + "__init__.py")       # a folder names its package
            words = words[1:]
        folder = opened[-1][1] if opened else ""
        for word in words:
            for name in re.findall(r"\b([\w/]+\.py)\b", word):
                found.add(folder + name)
    return found
