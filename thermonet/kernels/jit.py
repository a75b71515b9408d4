"""The only place thermonet chooses Numba options. Do not call ``numba.njit`` elsewhere.

* ``cache=True``: compile once, reuse across processes (``THERMONET_NUMBA_CACHE=0`` disables it).
* ``nogil=True``: kernels release the GIL so Python threads can run replicas in parallel.
* ``error_model="numpy"``: ``1.0/0.0`` gives ``inf`` instead of raising, so a non-finite energy
  becomes a rejected proposal, never an exception.
* ``fastmath`` is off. ``THERMONET_FASTMATH=1`` enables only the flags that keep NaN/inf
  semantics (no ``nnan``, no ``ninf``), so divergence checks keep working.

Cache invalidation
------------------
Numba keys a cached function on its own source file only, so a kernel that calls a kernel in
another file keeps running the *old* callee after that file changes (an HMC trajectory would
keep an outdated gradient kernel). Functions compiled with :func:`kernel` are
therefore stamped with a hash of their own file *and* of every ``.py`` file in
``thermonet/kernels`` and its sub-packages (plus the directories in ``THERMONET_KERNEL_DEPS``,
separated by ``os.pathsep``, for plugins whose kernels call each other across files): any edit
recompiles them. This uses Numba's cache-locator hook and affects only functions compiled
here.

The BLAS backend
----------------
A kernel whose compiled code depends on the matrix-product backend
(:mod:`thermonet.kernels.matmul.backend`) reads it through :func:`compiled_backend` while it
is typed, directly or in a kernel it calls. Its cache entry records the backend, and an entry
recorded with another backend than the process's is a miss (the kernel is compiled again);
every other kernel's entry records none. Choosing the backend may measure it (a calibration of
about 5 CPU s on a new machine), so a run whose kernels call no matrix product (the robot arm's
shallow kernel) never chooses it.

Symbols registered on demand
----------------------------
A kernel that calls an external symbol LLVM cannot resolve crashes the process when it is
linked, fresh or loaded from the cache. A symbol that is costly to provide (thermonet's own
matrix products: a compile of about 2 CPU s per dtype) is registered only when a kernel
needs it (:func:`lazy_symbol`): the code that types the call registers it when a kernel is
compiled, and a kernel loaded from the cache whose code names the symbol has it registered
first.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numba
from numba import prange
from numba.core import caching
from numba.core import event as numba_event

from thermonet.kernels.matmul import backend

#: fastmath flags that keep NaN/inf semantics.
SAFE_FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})
FASTMATH: Any = set(SAFE_FASTMATH) if os.environ.get("THERMONET_FASTMATH") == "1" else False
_CACHE = os.environ.get("THERMONET_NUMBA_CACHE", "1") != "0"
_KERNELS_DIR = os.path.dirname(os.path.abspath(__file__))


def _dependency_dirs() -> list[str]:
    extra = [d for d in os.environ.get("THERMONET_KERNEL_DEPS", "").split(os.pathsep) if d]
    return [_KERNELS_DIR, *extra]


def _dependency_hash(own_file: str) -> bytes:
    h = hashlib.sha256()
    files = {os.path.abspath(own_file)}
    for root, dirs, names in os.walk(_KERNELS_DIR):
        dirs[:] = [n for n in dirs if n != "__pycache__"]
        files.update(os.path.join(root, n) for n in names if n.endswith(".py"))
    for d in _dependency_dirs()[1:]:
        if os.path.isdir(d):
            files.update(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".py"))
    for path in sorted(files):
        try:
            with open(path, "rb") as fh:
                h.update(path.encode())
                h.update(fh.read())
        except OSError:
            pass
    return h.digest()


@functools.cache
def _layout_tag() -> str:
    """A short hash of which kernel modules exist where (names only, not contents), in
    ``thermonet/kernels`` and the ``THERMONET_KERNEL_DEPS`` directories."""
    names = []
    for i, top in enumerate(_dependency_dirs()):
        for root, dirs, files in os.walk(top):
            dirs[:] = [n for n in dirs if n != "__pycache__"]
            names += [f"{i}:{os.path.relpath(os.path.join(root, n), top)}" for n in files
                      if n.endswith(".py")]
    return "layout-" + hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12]


def install_cache_locators() -> None:
    """Put locators with the dependency-aware stamp in front of Numba's own (once)."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - a Numba without the hook: plain caching
        return
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    if impl is None or not isinstance(getattr(impl, "_locator_classes", None), list):
        return
    if any(getattr(c, "_thermonet", False) for c in impl._locator_classes):
        return

    class _Mixin:
        _thermonet = True

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not getattr(py_func, "_thermonet_kernel", False):
                return None
            return super().from_function(py_func, py_file)  # type: ignore[misc]

        def get_source_stamp(self) -> Any:
            return _dependency_hash(self._py_file)  # type: ignore[attr-defined]

        def get_cache_path(self) -> Any:
            # An index's pickled signatures name the types by module path, and Numba raises
            # (instead of missing) when one of those modules has moved: each layout of the
            # kernels' modules therefore keeps its cache in a directory of its own.
            return os.path.join(super().get_cache_path(), _layout_tag())  # type: ignore[misc]

    bases = [getattr(caching, n) for n in ("UserProvidedCacheLocator", "InTreeCacheLocator",
                                            "UserWideCacheLocator") if hasattr(caching, n)]
    ours = [type("Thermonet" + b.__name__, (_Mixin, b), {}) for b in bases]
    impl._locator_classes[:0] = ours


#: symbol name -> the function that registers it with LLVM (idempotent), until it is registered
_LAZY: dict[str, Callable[[], None]] = {}


def lazy_symbol(name: str, register: Callable[[], None]) -> None:
    """Call ``register()`` before the first kernel whose cached code calls the symbol ``name``
    is loaded. The caller also calls it (or has it called) when a call of the symbol is typed,
    which covers kernels compiled afresh."""
    _LAZY[name] = register


def _blobs(x: Any) -> Iterator[bytes]:
    if isinstance(x, bytes):
        yield x
    elif isinstance(x, tuple):
        for item in x:
            yield from _blobs(item)


class _Compiles(numba_event.Listener):  # type: ignore[misc]
    """Per thread, the compiles in progress (nested: a kernel types its callees) and whether
    each has read the backend; a compile's flag is kept for its cache entry, which Numba
    saves right after the compile ends."""

    def __init__(self) -> None:
        self.local = threading.local()

    def stack(self) -> list[bool]:
        if not hasattr(self.local, "stack"):
            self.local.stack = []
        return self.local.stack  # type: ignore[no-any-return]

    def on_start(self, event: Any) -> None:
        self.stack().append(False)

    def on_end(self, event: Any) -> None:
        self.local.last = self.stack().pop()

    def mark(self) -> None:
        stack = self.stack()
        stack[:] = [True] * len(stack)

    def take_last(self) -> bool | None:
        last = getattr(self.local, "last", None)
        self.local.last = None
        return last  # type: ignore[no-any-return]


_COMPILES = _Compiles()
numba_event.register("numba:compile", _COMPILES)


def compiled_backend() -> str:
    """The process's BLAS backend (choosing it, which may measure), for code being compiled:
    the kernels being compiled now record it in their cache entries."""
    _COMPILES.mark()
    return str(backend.BACKEND)


def _links_backend(library: Any, seen: set[int] | None = None) -> bool:
    """Whether ``library`` or one it links recorded a backend (a kernel compiled or loaded
    earlier in the process, which this one calls)."""
    seen = set() if seen is None else seen
    if id(library) in seen:
        return False
    seen.add(id(library))
    if getattr(library, "_thermonet_backend", ""):
        return True
    return any(_links_backend(lib, seen) for lib in getattr(library, "_linking_libraries", ()))


class _LinkLazySymbols(caching.CompileResultCacheImpl):  # type: ignore[misc]
    def reduce(self, cres: Any) -> Any:
        read = _COMPILES.take_last()      # None: no compile event seen, so assume it did
        tag = compiled_backend() if read is not False or _links_backend(cres.library) else ""
        cres.library._thermonet_backend = tag
        return super().reduce(cres), tag

    def rebuild(self, target_context: Any, payload: Any) -> Any:
        payload, tag = payload
        if tag and compiled_backend() != tag:
            return None                   # compiled for another backend: compile it again
        # payload[0] is the library: its object code and bitcode name the symbols it calls
        for name in [n for n in _LAZY if any(n.encode() in b for b in _blobs(payload[0]))]:
            _LAZY.pop(name, lambda: None)()
        cres = super().rebuild(target_context, payload)
        cres.library._thermonet_backend = tag
        return cres


def kernel(func: Callable[..., Any] | None = None, *, parallel: bool = False,
           inline: bool = False) -> Any:
    """Compile ``func`` with thermonet's kernel options (cache, nogil, numpy error model).

    ``inline=True`` inlines a kernel's code into the kernels that call it before they are
    typed (Numba's ``inline="always"``), so it is no compile of its own for them: for small
    adapters between a kernel and the contract of its callers. Called from Python it compiles
    as any kernel."""
    if _CACHE:
        # Numba picks a function's cache locator when it is decorated, so the stamped locators
        # must be in place by then; installing them is idempotent and touches no other function
        install_cache_locators()

    def wrap(f: Callable[..., Any]) -> Any:
        f._thermonet_kernel = True  # type: ignore[attr-defined]
        d = numba.njit(
            cache=_CACHE, nogil=True, error_model="numpy", fastmath=FASTMATH, parallel=parallel,
            inline="always" if inline else "never")(f)
        impl = getattr(getattr(d, "_cache", None), "_impl", None)
        if type(impl) is caching.CompileResultCacheImpl:
            impl.__class__ = _LinkLazySymbols    # the same object, with the check on loading
        return d

    return wrap if func is None else wrap(func)


def cfunction(signature: Any) -> Callable[[Callable[..., Any]], Any]:
    """Compile a function as a C-callable (``numba.cfunc``) with the kernels' options and cache
    stamp; its ``address`` can be registered as a symbol that kernels call."""
    if _CACHE:
        install_cache_locators()

    def wrap(f: Callable[..., Any]) -> Any:
        f._thermonet_kernel = True  # type: ignore[attr-defined]
        return numba.cfunc(signature, cache=_CACHE, error_model="numpy", fastmath=FASTMATH)(f)

    return wrap


__all__ = ["FASTMATH", "SAFE_FASTMATH", "cfunction", "compiled_backend",
           "install_cache_locators", "kernel",
           "lazy_symbol", "prange"]
