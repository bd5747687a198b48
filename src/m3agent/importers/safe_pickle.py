"""An allow-list unpickler for the memory graphs released with M3-Bench.

The released graphs are pickles of the reference ``VideoGraph`` (module
``videograph`` or ``mmagent.videograph``). Unpickling an arbitrary pickle runs
arbitrary code, so :class:`GraphUnpickler` resolves only:

- the reference graph classes, mapped to inert surrogates of ours that just
  hold their attribute dict (no methods of the original ever run);
- the builtin containers (dict, list, set, frozenset, tuple) and
  ``collections.defaultdict`` / ``OrderedDict``;
- the numpy array/scalar reconstruction functions (``_reconstruct``,
  ``ndarray``, ``dtype``, ``scalar``, ``_frombuffer``), because embeddings
  may be stored as numpy values. They only allocate and fill arrays.

Everything else (``os.system``, ``builtins.eval``, ``subprocess.*`` ...)
raises :class:`~m3agent.errors.UnsafePickleError` before anything is called.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from m3agent.errors import BenchmarkError, UnsafePickleError

GRAPH_MODULES = ("videograph", "mmagent.videograph")
_NUMPY_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMPY_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")


class _Inert:
    """Holds the pickled attribute dict of a reference object; has no behaviour."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots dict)
            merged: dict[str, Any] = {}
            for part in state:
                if part is not None and not isinstance(part, dict):
                    raise UnsafePickleError("unexpected object state in the graph pickle")
                merged.update(part or {})
            state = merged
        if not isinstance(state, dict):
            raise UnsafePickleError("unexpected object state in the graph pickle")
        self.state = state


class GraphSurrogate(_Inert):
    """Stands in for the reference ``VideoGraph``."""

    __slots__ = ()


class NodeSurrogate(_Inert):
    """Stands in for the reference ``VideoGraph.Node``."""

    __slots__ = ()


_GRAPH_CLASSES: dict[str, type[_Inert]] = {
    "VideoGraph": GraphSurrogate,
    "VideoGraph.Node": NodeSurrogate,
    "Node": NodeSurrogate,
}
_BUILTIN_CONTAINERS: dict[str, type] = {
    "dict": dict,
    "list": list,
    "set": set,
    "frozenset": frozenset,
    "tuple": tuple,
}


class GraphUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the allow-listed names above."""

    def find_class(self, module: str, name: str) -> Any:
        if module in GRAPH_MODULES and name in _GRAPH_CLASSES:
            return _GRAPH_CLASSES[name]
        if module == "builtins" and name in _BUILTIN_CONTAINERS:
            return _BUILTIN_CONTAINERS[name]
        if module == "collections" and name in ("defaultdict", "OrderedDict"):
            import collections

            return getattr(collections, name)
        numpy_object = _numpy_object(module, name)
        if numpy_object is not None:
            return numpy_object
        raise UnsafePickleError(f"the pickle asks for {module}.{name}, which is not on the allow-list")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("the pickle uses persistent ids, which a memory graph never does")


def _numpy_object(module: str, name: str) -> Any | None:
    """The numpy reconstruction callables a pickled array or scalar needs, else ``None``."""
    wanted = (
        (module == "numpy" and name in ("ndarray", "dtype"))
        or (module in _NUMPY_MULTIARRAY and name in ("_reconstruct", "scalar"))
        or (module in _NUMPY_NUMERIC and name == "_frombuffer")
    )
    if not wanted:
        return None
    import importlib

    import numpy as np

    if module == "numpy":
        return np.ndarray if name == "ndarray" else np.dtype
    suffix = "multiarray" if module in _NUMPY_MULTIARRAY else "numeric"
    try:  # numpy 2 keeps these in numpy._core, numpy 1 in numpy.core
        home = importlib.import_module(f"numpy._core.{suffix}")
    except ImportError:  # pragma: no cover - numpy 1
        home = importlib.import_module(f"numpy.core.{suffix}")
    return getattr(home, name)


def loads_graph(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`GraphUnpickler`; refused names raise ``UnsafePickleError``."""
    try:
        return GraphUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise BenchmarkError(
            f"the file is not a readable memory-graph pickle: {exc}",
            hint="check that it is one of the .pkl memory graphs released with M3-Bench",
        ) from None


def load_graph_file(path: Path | str) -> Any:
    """Read and safely unpickle a memory-graph file."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise BenchmarkError(f"cannot read {file}: {exc.strerror or exc}", hint="check the path") from None
    return loads_graph(data)
