"""A dry run of a pickle's opcodes that bounds the work of loading it, before anything is loaded.

The C unpickler trusts its input and cannot be interrupted: a tuple nested a
million deep crashes the process when hashed as a dict key, ``t = (t, t)``
forty deep takes 2**40 steps to hash, a memo index of 2**32 allocates a
32 GiB table, and ten thousand int keys equal modulo 2**61 - 1 make a dict
quadratic. :func:`scan_pickle` simulates the pickle machine on small records
(nothing is built, nothing is called) and refuses, naming the reason, a pickle
that:

- names a global outside the allow-list, or uses an opcode a memory graph
  never needs (persistent ids, extension codes, out-of-band buffers, INST/OBJ);
- nests deeper than ``max_depth`` or puts more than ``max_items`` in one container;
- hashes (as a dict key or set member) anything but a str, bytes, number,
  None or a tuple of those of at most :data:`KEY_WEIGHT` parts, or gives more
  than :data:`MAX_SAME_HASH` keys of one container the same hash;
- uses a memo index beyond the opcodes read so far;
- would take more than ``max_memory_bytes`` once loaded (estimated), or is
  still being scanned at the deadline.

What passes loads in time and memory linear in its size; the numpy
constructors it may call are bounded when loading (:mod:`.safe_pickle`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from m3agent.errors import BenchmarkError, UnsafePickleError
from m3agent.importers.limits import Deadline

KEY_WEIGHT = 64
"""Most parts (the key and everything inside it) of one dict key or set member."""
MAX_SAME_HASH = 64
"""Most keys of one container that may share one hash value."""

_CAP = 1 << 40  # weights saturate here; only comparisons against small limits matter
_FLOAT_RUN = re.compile(rb"(?:G[\x00-\xff]{8})+", re.DOTALL)
_LIMIT_HINT = "if the file is a genuine M3-Bench graph, raise settings importer.{} (M3AGENT_IMPORTER__{})"


@dataclass(frozen=True, slots=True)
class ScanLimits:
    """The bounds a pickle must stay within (from :class:`~m3agent.settings.ImportSettings`)."""

    max_depth: int = 64
    max_items: int = 2_000_000
    max_memory_bytes: int = 4 << 30
    deadline: Deadline | None = None


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What the scan learned: opcodes, the estimated memory of the loaded objects."""

    opcodes: int
    memory_bytes: int


class _H:
    """An object whose hash is a given value: the hash of a tuple of these equals the tuple's real hash."""

    __slots__ = ("h",)

    def __init__(self, h: int) -> None:
        self.h = h

    def __hash__(self) -> int:
        return self.h


class _Rec:
    """A simulated object: its kind, nesting depth, expanded size (``weight``) and, for keys, its hash."""

    __slots__ = (
        "children",
        "depth",
        "hashes",
        "hkey",
        "items",
        "kind",
        "maxkey",
        "nbytes",
        "same",
        "unkeyable",
        "value",
        "weight",
    )

    def __init__(self, kind: str, depth: int = 0, weight: int = 1, hkey: int | None = None, value: Any = None,
                 nbytes: int = 0) -> None:
        self.kind = kind
        self.depth = depth
        self.weight = weight
        self.hkey = hkey  # the real hash for keyable values, None for unkeyable ones
        self.value = value  # short str values (module and class names), class names, dtype codes
        self.children: tuple[Any, ...] | None = None  # kept for small tuples (REDUCE arguments)
        self.items = 0
        self.hashes: dict[int, int] | None = None
        self.same = 0  # most items of this container sharing one hash
        self.maxkey = 0  # largest weight among its items
        self.unkeyable = 0  # items that could not be a key
        self.nbytes = nbytes  # bytes of str/bytes data inside (an array's BUILD copies them)


_ATOM = _Rec("atom", hkey=0)  # floats and None: their hash is not tracked (0: counted as colliding)
_CONTAINERS = ("list", "dict", "set", "tuple", "frozenset")


def scan_pickle(data: bytes, limits: ScanLimits) -> ScanResult:
    """Dry-run ``data``; raise :class:`UnsafePickleError` (over a limit, refused name) or
    :class:`BenchmarkError` (not a well-formed pickle)."""
    return _Scan(data, limits).run()


class _Scan:
    def __init__(self, data: bytes, limits: ScanLimits) -> None:
        self.data = data
        self.limits = limits
        self.pos = 0
        self.ops = 0
        self.memory = 0
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}
        self.next_check = 0  # the opcode count at which the deadline is checked next
        self.dispatch = self._dispatch_table()

    # -- driver -----------------------------------------------------------------------------
    def run(self) -> ScanResult:
        data, size = self.data, len(self.data)
        dispatch, stack = self.dispatch, self.stack
        while True:
            if self.pos >= size:
                raise _malformed("it ends before its STOP opcode")
            op = data[self.pos]
            if op == 0x47:  # BINFLOAT runs: the bulk of a graph (text embeddings as float lists)
                run = _FLOAT_RUN.match(data, self.pos)
                count = (run.end() - self.pos) // 9 if run else 0
                if count == 0:
                    raise _malformed("a float is cut short")
                stack.extend(repeat(_ATOM, count))
                self.pos += 9 * count
                self.ops += count
                self._charge(32 * count)
                if self.ops >= self.next_check:
                    self._check_time()
                continue
            self.pos += 1
            self.ops += 1
            if self.ops >= self.next_check:
                self._check_time()
            handler = dispatch.get(op)
            if handler is None:
                raise _unsupported(op)
            if handler():
                return ScanResult(self.ops, self.memory)

    def _check_time(self) -> None:
        self.next_check = self.ops + 65536
        if self.limits.deadline is not None:
            self.limits.deadline.check("reading the pickle")

    def _dispatch_table(self) -> dict[int, Callable[[], bool | None]]:
        table: dict[bytes, Callable[[], bool | None]] = {
            b"(": self._mark, b"0": self._pop, b"1": self._pop_mark, b"2": self._dup, b".": self._stop,
            b"\x80": self._proto, b"\x95": self._frame,
            b"N": lambda: self._push(_ATOM), b"\x88": lambda: self._push(True), b"\x89": lambda: self._push(False),
            b"J": lambda: self._push(self._int(4, signed=True)), b"K": lambda: self._push(self._int(1)),
            b"M": lambda: self._push(self._int(2)), b"\x8a": lambda: self._push(self._long(1)),
            b"\x8b": lambda: self._push(self._long(4)), b"I": self._text_int, b"L": self._text_long,
            b"F": self._text_float,
            b"\x8c": lambda: self._string(1), b"X": lambda: self._string(4), b"\x8d": lambda: self._string(8),
            b"U": lambda: self._string(1, legacy=True), b"T": lambda: self._string(4, legacy=True),
            b"V": self._text_unicode, b"S": self._text_string,
            b"C": lambda: self._bytes(1), b"B": lambda: self._bytes(4), b"\x8e": lambda: self._bytes(8),
            b"\x96": lambda: self._bytes(8, kind="bytearray"),
            b"]": lambda: self._push(self._new("list")), b"}": lambda: self._push(self._new("dict")),
            b"\x8f": lambda: self._push(self._new("set")), b")": lambda: self._push(self._tuple(())),
            b"\x85": lambda: self._tuple_of(1), b"\x86": lambda: self._tuple_of(2), b"\x87": lambda: self._tuple_of(3),
            b"t": lambda: self._push(self._tuple(self._pop_to_mark())), b"l": self._list, b"d": self._dict,
            b"\x91": self._frozenset, b"a": self._append, b"e": self._appends, b"s": self._setitem,
            b"u": self._setitems, b"\x90": self._additems,
            b"h": lambda: self._get(self._int(1)), b"j": lambda: self._get(self._int(4)), b"g": self._text_get,
            b"q": lambda: self._put(self._int(1)), b"r": lambda: self._put(self._int(4)), b"p": self._text_put,
            b"\x94": lambda: self._put(len(self.memo)),
            b"c": self._global, b"\x93": self._stack_global, b"R": self._reduce, b"\x81": self._newobj,
            b"b": self._build,
        }
        return {key[0]: handler for key, handler in table.items()}

    # -- reading arguments ------------------------------------------------------------------
    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise _malformed("an opcode argument runs past the end of the file")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def _int(self, n: int, signed: bool = False) -> int:
        return int.from_bytes(self._take(n), "little", signed=signed)

    def _line(self) -> bytes:
        end = self.data.find(b"\n", self.pos, self.pos + (1 << 16))
        if end < 0:
            raise _malformed("a text argument has no end of line")
        line = self.data[self.pos:end]
        self.pos = end + 1
        return line

    def _long(self, width: int) -> int:
        size = self._int(width, signed=width == 4)
        raw = self._take(size)
        self._charge(32 + size)
        return int.from_bytes(raw, "little", signed=True)

    # -- stack ------------------------------------------------------------------------------
    def _push(self, value: Any) -> None:
        self.stack.append(value)

    def _pop1(self) -> Any:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise _malformed("an opcode pops from an empty stack")
        return self.stack.pop()

    def _top(self) -> Any:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise _malformed("an opcode needs an object on an empty stack")
        return self.stack[-1]

    def _pop_to_mark(self) -> list[Any]:
        if not self.marks:
            raise _malformed("an opcode needs a MARK that is missing")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _mark(self) -> None:
        self.marks.append(len(self.stack))

    def _pop(self) -> None:
        if len(self.stack) > (self.marks[-1] if self.marks else 0):
            self.stack.pop()
        elif self.marks:
            self.marks.pop()
        else:
            raise _malformed("POP on an empty stack")

    def _pop_mark(self) -> None:
        self._pop_to_mark()

    def _dup(self) -> None:
        self._push(self._top())

    def _stop(self) -> bool:
        self._top()
        return True

    def _proto(self) -> None:
        if self._int(1) > 5:
            raise _malformed("it uses a pickle protocol newer than 5")

    def _frame(self) -> None:
        self._int(8)

    # -- scalars ----------------------------------------------------------------------------
    def _text_int(self) -> None:
        text = self._line()
        if text in (b"00", b"01"):
            self._push(text == b"01")
            return
        self._push(_parse_int(text))

    def _text_long(self) -> None:
        self._push(_parse_int(self._line().rstrip(b"L")))

    def _text_float(self) -> None:
        self._line()
        self._push(_ATOM)

    def _string(self, width: int, legacy: bool = False) -> None:
        raw = self._take(self._int(width, signed=width == 4 and legacy))
        try:
            text = raw.decode("utf-8", "surrogatepass") if not legacy else raw.decode("ascii")
        except UnicodeDecodeError:
            raise _malformed("a string is not valid text") from None
        self._push_text(text, len(raw))

    def _text_unicode(self) -> None:
        line = self._line()
        try:
            text = codecs.decode(line, "raw_unicode_escape")
        except UnicodeDecodeError:
            raise _malformed("a string is not valid text") from None
        self._push_text(text, len(line))

    def _text_string(self) -> None:
        line = self._line()
        self._charge(64 + len(line))
        self._push(_Rec("str", hkey=0, nbytes=len(line)))  # protocol 0 only: hash left untracked (0)

    def _push_text(self, text: str, size: int) -> None:
        self._charge(64 + size)
        self._push(_Rec("str", hkey=hash(text), value=text if len(text) <= 200 else None, nbytes=size))

    def _bytes(self, width: int, kind: str = "bytes") -> None:
        raw = self._take(self._int(width))
        self._charge(48 + len(raw))
        self._push(_Rec(kind, hkey=hash(raw) if kind == "bytes" else None, value=raw if len(raw) <= 16 else None,
                        nbytes=len(raw)))

    # -- containers -------------------------------------------------------------------------
    def _new(self, kind: str) -> _Rec:
        self._charge(72)
        return _Rec(kind)

    def _tuple(self, items: list[Any] | tuple[Any, ...]) -> _Rec:
        record = self._new("tuple")
        self._fill(record, items)
        hkeys = [h for h in (_hkey(item) for item in items) if h is not None]
        if len(hkeys) < len(items):
            record.hkey = None  # holds something that cannot be hashed: never a key
        else:  # the real hash of the tuple, from its items' hashes (0 when too big to be a key anyway)
            record.hkey = hash(tuple(_H(h) for h in hkeys)) if len(hkeys) <= KEY_WEIGHT else 0
        if len(items) <= 16:
            record.children = tuple(items)
        return record

    def _tuple_of(self, n: int) -> None:
        if len(self.stack) - (self.marks[-1] if self.marks else 0) < n:
            raise _malformed("a TUPLE opcode lacks its items")
        items = self.stack[-n:]
        del self.stack[-n:]
        self._push(self._tuple(items))

    def _fill(self, record: _Rec, items: list[Any] | tuple[Any, ...], keys: bool = False) -> None:
        """Add ``items`` to a container record: size, memory, depth, weight; hashes of keys and list items."""
        count = len(items)
        if not count:
            return
        record.items += count
        if record.items > self.limits.max_items:
            raise _limit(f"a {record.kind} holds more than {self.limits.max_items:,} items", "max_items")
        self._charge({"dict": 50, "set": 60, "frozenset": 60}.get(record.kind, 8) * count)
        tracked = keys or record.kind in ("list", "tuple")  # list items may become set members (set(list))
        if items.count(_ATOM) == count:  # all floats or None: an embedding list, the common case
            depth, weight, heaviest = 1, count, 1
            if tracked:
                self._tally(record, {0: count}, keys)
        else:
            depth = 1 + max(_depth(item) for item in items)
            weights = [_weight(item) for item in items]
            weight, heaviest = sum(weights), max(weights)
            if tracked:
                hkeys = [_hkey(item) for item in items]
                if keys:
                    for item, item_weight, h in zip(items, weights, hkeys, strict=True):
                        _check_key(item, item_weight, h)
                record.unkeyable += hkeys.count(None)
                tally: dict[int, int] = {}
                for h in hkeys:
                    if h is not None:
                        tally[h] = tally.get(h, 0) + 1
                self._tally(record, tally, keys)
        record.depth = max(record.depth, depth)
        record.weight = min(_CAP, record.weight + weight)
        record.maxkey = max(record.maxkey, heaviest)
        if record.depth > self.limits.max_depth:
            raise _limit(f"objects are nested more than {self.limits.max_depth} deep", "max_depth")

    def _tally(self, record: _Rec, tally: dict[int, int], keys: bool) -> None:
        """Count hash values among a container's items; many keys sharing one is hash flooding."""
        counts = record.hashes if record.hashes is not None else {}
        record.hashes = counts
        for h, n in tally.items():
            seen = counts.get(h, 0) + n
            counts[h] = seen
            record.same = max(record.same, seen)
        if keys and record.same > MAX_SAME_HASH:
            raise UnsafePickleError(
                f"more than {MAX_SAME_HASH} keys of one {record.kind} share one hash (a hash-flooding pattern)",
                hint="memory graphs key their dicts by distinct ids; this file was refused")

    def _container(self, kind: str) -> _Rec:
        target = self._top()
        if not isinstance(target, _Rec) or target.kind != kind:
            raise _malformed(f"an opcode adds {kind} items to a {_kind_of(target)}")
        return target

    def _list(self) -> None:
        record = self._new("list")
        self._fill(record, self._pop_to_mark())
        self._push(record)

    def _dict(self) -> None:
        items = self._pop_to_mark()
        record = self._new("dict")
        self._set_pairs(record, items)
        self._push(record)

    def _frozenset(self) -> None:
        record = self._new("frozenset")
        self._fill(record, self._pop_to_mark(), keys=True)
        record.hkey = None  # frozensets are never keys of a memory graph
        self._push(record)

    def _append(self) -> None:
        item = self._pop1()
        self._fill(self._container("list"), [item])

    def _appends(self) -> None:
        items = self._pop_to_mark()
        self._fill(self._container("list"), items)

    def _setitem(self) -> None:
        value, key = self._pop1(), self._pop1()
        self._set_pairs(self._container("dict"), [key, value])

    def _setitems(self) -> None:
        items = self._pop_to_mark()
        self._set_pairs(self._container("dict"), items)

    def _set_pairs(self, record: _Rec, items: list[Any]) -> None:
        if len(items) % 2:
            raise _malformed("a dict is given a key without a value")
        keys, values = items[0::2], items[1::2]
        self._fill(record, keys, keys=True)
        record.items -= len(keys)  # counted once, with the values
        self._fill(record, values)

    def _additems(self) -> None:
        items = self._pop_to_mark()
        self._fill(self._container("set"), items, keys=True)

    # -- memo -------------------------------------------------------------------------------
    def _get(self, index: int) -> None:
        if index not in self.memo:
            raise _malformed(f"memo entry {index} is read before it is written")
        self._push(self.memo[index])

    def _text_get(self) -> None:
        self._get(_parse_int(self._line()))

    def _put(self, index: int) -> None:
        if not 0 <= index <= self.ops:  # the C unpickler sizes its memo table by the largest index
            raise UnsafePickleError(f"the pickle writes memo entry {index:,} after only {self.ops:,} opcodes",
                                    hint="a pickle written by Python never does this; the file was refused")
        self.memo[index] = self._top()
        self._charge(16)

    def _text_put(self) -> None:
        self._put(_parse_int(self._line()))

    # -- globals and calls ------------------------------------------------------------------
    def _global(self) -> None:
        module = self._line().decode("utf-8", "replace")
        name = self._line().decode("utf-8", "replace")
        self._push(_Rec("class", hkey=None, value=allowed_name(module, name)))

    def _stack_global(self) -> None:
        name, module = self._pop1(), self._pop1()
        if not all(isinstance(v, _Rec) and v.kind == "str" and v.value is not None for v in (name, module)):
            raise UnsafePickleError("the pickle names a class by a computed value",
                                    hint="a memory graph names its classes plainly; this file was refused")
        self._push(_Rec("class", hkey=None, value=allowed_name(module.value, name.value)))

    def _reduce(self) -> None:
        args, func = self._pop1(), self._pop1()
        self._push(self._call(func, args, "REDUCE"))

    def _newobj(self) -> None:
        args, cls = self._pop1(), self._pop1()
        self._push(self._call(cls, args, "NEWOBJ"))

    def _call(self, func: Any, args: Any, how: str) -> _Rec:
        """The record of what calling an allow-listed ``func`` with ``args`` gives."""
        if not (isinstance(func, _Rec) and func.kind == "class"):
            raise _malformed(f"{how} calls a {_kind_of(func)}")
        if not (isinstance(args, _Rec) and args.kind == "tuple"):
            raise _malformed(f"{how} arguments are a {_kind_of(args)}, not a tuple")
        name = func.value
        given = args.children if args.children is not None else ()
        if args.items and args.children is None:
            raise _malformed(f"{how} of {name} with {args.items} arguments")
        if name in GRAPH_CALLABLES:
            if given:
                raise _malformed(f"{how} gives arguments to {name}")
            return self._object("obj", args)
        if name in NUMPY_CALLABLES:
            if how != "REDUCE":
                raise UnsafePickleError(f"the pickle builds {name} with NEWOBJ", hint="this file was refused")
            return self._object(NUMPY_CALLABLES[name], args)
        return self._builtin(name, given, how)

    def _object(self, kind: str, args: _Rec) -> _Rec:
        self._charge(112)
        return _Rec(kind, depth=args.depth, weight=min(_CAP, args.weight + 1), hkey=None, nbytes=args.nbytes)

    def _builtin(self, name: str, given: tuple[Any, ...], how: str) -> _Rec:
        kind = BUILTIN_CALLABLES[name]
        if not given or (how == "NEWOBJ" and kind in ("list", "dict", "set")):
            return self._new(kind)
        factory = given[0] is _ATOM or _kind_of(given[0]) == "class"
        if name == "collections.defaultdict" and len(given) == 1 and factory:
            return self._new(kind)  # defaultdict(factory): the factory is only stored
        source = given[0]
        if len(given) > 1 or kind == "dict" or not (isinstance(source, _Rec) and source.kind in _CONTAINERS):
            raise UnsafePickleError(f"the pickle calls {name} with arguments a pickler never writes",
                                    hint="this file was refused")
        record = self._new(kind)
        record.items, record.depth, record.weight = source.items, source.depth, source.weight
        record.maxkey, record.unkeyable, record.same = source.maxkey, source.unkeyable, source.same
        self._charge(8 * source.items)
        if kind in ("set", "frozenset"):
            if source.unkeyable or source.maxkey > KEY_WEIGHT:
                raise _unhashable()
            if source.same > MAX_SAME_HASH:
                raise UnsafePickleError(f"more than {MAX_SAME_HASH} members of one {kind} share one hash",
                                        hint="this file was refused")
        return record

    def _build(self) -> None:
        state = self._pop1()
        target = self._top()
        if not (isinstance(target, _Rec) and target.kind in ("obj", "array", "dtype")):
            raise _malformed(f"BUILD sets the state of a {_kind_of(target)}")
        target.depth = max(target.depth, 1 + _depth(state))
        target.weight = min(_CAP, target.weight + _weight(state))
        if target.kind == "array" and isinstance(state, _Rec):
            self._charge(state.nbytes)  # the array copies its data out of the pickle
        if target.depth > self.limits.max_depth:
            raise _limit(f"objects are nested more than {self.limits.max_depth} deep", "max_depth")

    def _charge(self, nbytes: int) -> None:
        self.memory += nbytes
        if self.memory > self.limits.max_memory_bytes:
            raise _limit(f"loading it would take more than {self.limits.max_memory_bytes / 2**20:,.0f} MiB of memory",
                         "max_memory_mb")


# -- the allow-list, by name ------------------------------------------------------------------

GRAPH_MODULES = ("videograph", "mmagent.videograph")
GRAPH_CLASSES = ("VideoGraph", "VideoGraph.Node", "Node")
GRAPH_CALLABLES = {f"{m}.{c}" for m in GRAPH_MODULES for c in GRAPH_CLASSES}
BUILTIN_CALLABLES = {
    "builtins.dict": "dict", "builtins.list": "list", "builtins.set": "set", "builtins.frozenset": "frozenset",
    "builtins.tuple": "tuple", "collections.defaultdict": "dict", "collections.OrderedDict": "dict",
}
_NUMPY_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMPY_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")
NUMPY_CALLABLES = {
    "numpy.ndarray": "array", "numpy.dtype": "dtype",
    **{f"{m}._reconstruct": "array" for m in _NUMPY_MULTIARRAY},
    **{f"{m}.scalar": "scalar" for m in _NUMPY_MULTIARRAY},
    **{f"{m}._frombuffer": "array" for m in _NUMPY_NUMERIC},
}


def allowed_name(module: str, name: str) -> str:
    """``module.name`` when it is on the allow-list; else :class:`UnsafePickleError`."""
    full = f"{module}.{name}"
    if full in GRAPH_CALLABLES or full in BUILTIN_CALLABLES or full in NUMPY_CALLABLES:
        return full
    raise UnsafePickleError(f"the pickle asks for {module[:100]}.{name[:100]}, which is not on the allow-list")


# -- helpers --------------------------------------------------------------------------------------


def _depth(item: Any) -> int:
    return item.depth if isinstance(item, _Rec) else 0


def _weight(item: Any) -> int:
    return item.weight if isinstance(item, _Rec) else 1


def _hkey(item: Any) -> int | None:
    """The hash ``item`` would have as a key, or ``None`` when it cannot be a key of a memory graph."""
    if isinstance(item, _Rec):
        return item.hkey
    return hash(item)  # a Python int or bool


def _check_key(item: Any, weight: int, hkey: int | None) -> None:
    if hkey is None:
        raise _unhashable(_kind_of(item))
    if weight > KEY_WEIGHT:
        raise UnsafePickleError(
            f"a dict key or set member has more than {KEY_WEIGHT} parts (hashing it could take for ever)",
            hint="memory graphs key by ids, strings and short tuples; this file was refused")


def _unhashable(kind: str = "container") -> UnsafePickleError:
    return UnsafePickleError(f"a dict key or set member is a {kind}",
                             hint="memory graphs key by ids, strings and short tuples; this file was refused")


def _kind_of(item: Any) -> str:
    if isinstance(item, _Rec):
        return "number or None" if item is _ATOM else item.kind
    return type(item).__name__


def _parse_int(text: bytes) -> int:
    if len(text) > 40:
        raise _malformed("a number in text form is too long")
    try:
        return int(text)
    except ValueError:
        raise _malformed("a number in text form is not a number") from None


def _malformed(why: str) -> BenchmarkError:
    return BenchmarkError(f"the file is not a readable memory-graph pickle: {why}",
                          hint="check that it is one of the .pkl memory graphs released with M3-Bench")


def _limit(why: str, setting: str) -> UnsafePickleError:
    return UnsafePickleError(f"the memory-graph pickle was refused: {why}",
                             hint=_LIMIT_HINT.format(setting, setting.upper()))


_NAMES = {0x50: "PERSID", 0x51: "BINPERSID", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x69: "INST", 0x6F: "OBJ",
          0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER", 0x92: "NEWOBJ_EX"}


def _unsupported(op: int) -> Exception:
    if op in _NAMES:
        return UnsafePickleError(f"the pickle uses the {_NAMES[op]} opcode, which a memory graph never needs",
                                 hint="only memory graphs released with M3-Bench are imported; this file was refused")
    return _malformed(f"unknown opcode 0x{op:02x}")

