"""An allow-list unpickler for the memory graphs released with M3-Bench.

The released graphs are pickles of the reference ``VideoGraph`` (module
``videograph`` or ``mmagent.videograph``). Unpickling an arbitrary pickle runs
arbitrary code, and even an inert one can crash or stall the unpickler, so
:func:`loads_graph` first dry-runs the opcodes (:mod:`.pickle_scan`: depth,
sizes, hashed keys, memory, time) and then :class:`GraphUnpickler` resolves only:

- the reference graph classes, mapped to inert surrogates of ours that just
  hold their attribute dict (no methods of the original ever run);
- the builtin containers (dict, list, set, frozenset, tuple) and
  ``collections.defaultdict`` / ``OrderedDict``;
- the numpy array/scalar reconstruction functions (``_reconstruct``,
  ``ndarray``, ``dtype``, ``scalar``, ``_frombuffer``), because embeddings
  may be stored as numpy values, each wrapped so that it builds only plain
  numeric arrays of at most ``max_array_bytes`` within the memory budget.

Everything else (``os.system``, ``builtins.eval``, ``subprocess.*`` ...)
raises :class:`~m3agent.errors.UnsafePickleError` before anything is called.
"""

from __future__ import annotations

import io
import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from m3agent.errors import BenchmarkError, UnsafePickleError
from m3agent.importers.limits import Deadline, GraphLimits
from m3agent.importers.pickle_scan import GRAPH_MODULES, ScanLimits, allowed_name, scan_pickle

__all__ = ["GRAPH_MODULES", "GraphSurrogate", "GraphUnpickler", "NodeSurrogate", "load_graph_file", "loads_graph"]


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
_BUILTINS: dict[str, Any] = {"dict": dict, "list": list, "set": set, "frozenset": frozenset, "tuple": tuple}


class GraphUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the allow-listed names, numpy ones through bounded constructors."""

    def __init__(self, file: io.BytesIO, max_array_bytes: int, budget_bytes: int) -> None:
        super().__init__(file)
        self._numpy = _BoundedNumpy(max_array_bytes, budget_bytes)

    def find_class(self, module: str, name: str) -> Any:
        """The allow-listed stand-in for ``module.name`` (graph surrogates, plain builtins, bounded numpy);
        any other name raises :class:`UnsafePickleError`, so a pickle cannot run code."""
        full = allowed_name(module, name)  # raises UnsafePickleError for anything else
        if module in GRAPH_MODULES:
            return _GRAPH_CLASSES[name]
        if module == "builtins":
            return _BUILTINS[name]
        if module == "collections":
            import collections

            return getattr(collections, name)
        return self._numpy.constructor(full)

    def persistent_load(self, pid: Any) -> Any:
        """Always refused: persistent ids reach outside the pickle, and a memory graph never uses them."""
        raise UnsafePickleError("the pickle uses persistent ids, which a memory graph never does")


class _BoundedNumpy:
    """numpy's reconstruction callables, building only plain numeric arrays within the size limits."""

    def __init__(self, max_array_bytes: int, budget_bytes: int) -> None:
        self.max_array_bytes = max_array_bytes
        self.left = budget_bytes

    def constructor(self, full: str) -> Callable[..., Any]:
        constructors: dict[str, Callable[..., Any]] = {
            "ndarray": self.ndarray, "dtype": self.dtype, "_reconstruct": self.reconstruct, "scalar": self.scalar,
            "_frombuffer": self.frombuffer,
        }
        return constructors[full.rpartition(".")[2]]

    def _charge(self, shape: Any, dtype: Any) -> tuple[int, ...]:
        dims = (shape,) if isinstance(shape, int) else shape
        if not isinstance(dims, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in dims) or len(dims) > 32:
            raise UnsafePickleError("the pickle builds a numpy array of an invalid shape")
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes > self.max_array_bytes:
            raise UnsafePickleError(
                f"the pickle builds a numpy array of {nbytes:,} bytes (shape {shape}), over the limit of "
                f"{self.max_array_bytes:,}",
                hint="graph embeddings are a few kB; if this file is genuine, raise importer.max_array_mb "
                     "(M3AGENT_IMPORTER__MAX_ARRAY_MB)")
        self.left -= nbytes
        if self.left < 0:
            raise UnsafePickleError("the pickle's numpy arrays together exceed the import memory limit",
                                    hint="raise importer.max_memory_mb (M3AGENT_IMPORTER__MAX_MEMORY_MB) if genuine")
        return dims

    def dtype(self, code: Any, *_flags: Any) -> Any:
        import numpy as np

        try:
            kind = np.dtype(code) if isinstance(code, str) and len(code) <= 16 else None
        except (TypeError, ValueError):
            kind = None
        if kind is None or kind.kind not in "biuf" or kind.itemsize > 8:
            raise UnsafePickleError(f"the pickle builds numpy dtype {str(code)[:40]!r}; only plain numbers are read")
        return kind

    def _plain(self, dtype: Any) -> Any:
        import numpy as np

        if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or dtype.itemsize > 8:
            raise UnsafePickleError("the pickle builds a numpy value that is not a plain number")
        return dtype

    def ndarray(self, shape: Any, dtype: Any = None) -> Any:
        import numpy as np

        kind = self._plain(np.dtype(np.float64) if dtype is None else self.dtype(dtype) if isinstance(dtype, str)
                           else dtype)
        return np.ndarray(self._charge(shape, kind), kind)

    def reconstruct(self, subtype: Any, shape: Any, dtype: Any) -> Any:
        import numpy as np

        if subtype != self.ndarray:  # what find_class gave for numpy.ndarray (a fresh bound method each time)
            raise UnsafePickleError("the pickle reconstructs an array of a class other than numpy.ndarray")
        code = dtype.decode("ascii", "replace") if isinstance(dtype, bytes) else dtype
        kind = self._plain(self.dtype(code) if isinstance(code, str) else code)
        return _numpy_function("multiarray", "_reconstruct")(np.ndarray, self._charge(shape, kind), kind)

    def scalar(self, dtype: Any, data: Any) -> Any:
        if not isinstance(data, bytes) or len(data) != self._plain(dtype).itemsize:
            raise UnsafePickleError("the pickle builds a numpy scalar from malformed data")
        return _numpy_function("multiarray", "scalar")(dtype, data)

    def frombuffer(self, buffer: Any, dtype: Any, shape: Any, order: Any) -> Any:
        import numpy as np

        data = bytes(buffer) if isinstance(buffer, bytearray | bytes | pickle.PickleBuffer) else None
        kind = self._plain(dtype)
        dims = self._charge(shape, kind)
        if data is None or len(data) != math.prod(dims) * kind.itemsize or order not in ("C", "F"):
            raise UnsafePickleError("the pickle builds a numpy array from a buffer of the wrong size")
        return np.frombuffer(data, dtype=kind).reshape(dims, order=order)


def _numpy_function(suffix: str, name: str) -> Any:
    import importlib

    try:  # numpy 2 keeps these in numpy._core, numpy 1 in numpy.core
        home = importlib.import_module(f"numpy._core.{suffix}")
    except ImportError:  # pragma: no cover - numpy 1
        home = importlib.import_module(f"numpy.core.{suffix}")
    return getattr(home, name)


def loads_graph(data: bytes, limits: GraphLimits | None = None, deadline: Deadline | None = None) -> Any:
    """Dry-run ``data`` within ``limits``, then unpickle it with :class:`GraphUnpickler`.

    Refused names and exceeded limits raise ``UnsafePickleError``; anything else
    that makes the file unreadable raises ``BenchmarkError``. Nothing is executed.
    """
    bounds = limits or GraphLimits.from_settings()
    deadline = deadline or bounds.deadline()
    scanned = scan_pickle(data, ScanLimits(bounds.max_depth, bounds.max_items, bounds.max_memory_bytes, deadline))
    budget = bounds.max_memory_bytes - scanned.memory_bytes
    try:
        return GraphUnpickler(io.BytesIO(data), bounds.max_array_bytes, budget).load()
    except (UnsafePickleError, BenchmarkError):
        raise
    except MemoryError:
        raise UnsafePickleError("the memory-graph pickle did not fit in memory; nothing was imported",
                                hint="free memory, or lower importer.max_memory_mb to refuse such files early") \
            from None
    except Exception as exc:  # any failure of an untrusted file is "unreadable", never a traceback
        raise BenchmarkError(
            f"the file is not a readable memory-graph pickle: {type(exc).__name__}: {str(exc)[:200]}",
            hint="check that it is one of the .pkl memory graphs released with M3-Bench",
        ) from None


def load_graph_file(path: Path | str, limits: GraphLimits | None = None, deadline: Deadline | None = None) -> Any:
    """Read and safely unpickle a memory-graph file no larger than ``limits.max_file_bytes``."""
    bounds = limits or GraphLimits.from_settings()
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > bounds.max_file_bytes:
            raise UnsafePickleError(
                f"{file} is {size / 2**20:,.0f} MiB, over the limit of {bounds.max_file_bytes / 2**20:,.0f} MiB",
                hint="if it is a genuine M3-Bench graph, raise importer.max_file_mb (M3AGENT_IMPORTER__MAX_FILE_MB)")
        data = file.read_bytes()
    except OSError as exc:
        raise BenchmarkError(f"cannot read {file}: {exc.strerror or exc}", hint="check the path") from None
    return loads_graph(data, bounds, deadline)
