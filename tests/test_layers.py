"""The package's layers hold: a module imports its own layer and lower ones only, and no import cycle exists.

The order is README's pipeline read as code (docs/architecture.md draws it). Every ``import m3agent...`` and
``from m3agent... import`` counts, at module level and inside functions alike (a function-level import is a
dependency that is only paid later), and so do imports under ``if TYPE_CHECKING:``: they never run, but a type
that must be imported from above or from a module that imports back lives in the wrong module. A registry
entry (``"m3agent.store.sqlite.store:open_sqlite"``) is an import that runs later, so it counts for the layers too.
``from m3agent.store import merge_log`` imports the module ``m3agent.store.merge_log``; the parent package's
``__init__``, which Python also runs, is not counted as an import (as import linters do).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import m3agent

PACKAGE = Path(m3agent.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    # foundation: values, errors, settings and the parsers they use (store.location: the memory spec); ahead: an
    # iterator pulled by a background thread (media decoding ahead of perception and of the lip flow); mapped_pages:
    # giving back the pages of read-only mapped files (the OpenVINO worker's model file); dates: calendar days of dated
    # memories and what "yesterday" meant on one
    ("ahead", "dates", "domain", "errors", "intervals", "mapped_pages", "packages", "registry", "settings",
     "store.location", "tags", "terminal", "text"),
    # infrastructure, siblings: storage, media decoding, embedders, chat models with their prompts and replies
    ("embed", "llm", "media", "store"),
    ("perception",),
    ("identity",),
    ("memorize", "graph"),  # graph: the entity-graph operators over what memorize wrote
    ("control",),
    # entry points that wire the stages; "" is the package itself (m3agent/__init__.py re-exports api)
    ("", "api", "doctor", "executor", "importers", "pipeline", "views"),
    ("bench", "server"),
    ("train",),  # reinforcement learning of the control policy over the LoCoMo benchmark's memories
    ("cli",),  # `m3agent serve` and `m3agent bench` start the two above
)
"""Lowest first; names are relative to ``m3agent`` and cover their submodules (the longest name wins)."""

_REGISTRY_TARGET = re.compile(r"^(m3agent(?:\.\w+)+):\w+$")


@dataclass(frozen=True, slots=True)
class Import:
    """``importer`` imports ``target`` at ``line``: at module level, inside a function, or as a registry entry."""

    importer: str
    target: str
    line: int
    where: Literal["module", "function", "type", "registry"] = "module"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["m3agent", *path.relative_to(PACKAGE).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, source: str, *, is_package: bool, known: Mapping[str, object]) -> list[Import]:
    """The ``m3agent`` modules ``module`` (whose code is ``source``) imports, ``if TYPE_CHECKING:`` included.

    ``known`` holds the package's module names: ``from a import b`` means module ``a.b`` when that exists.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return ".".join([*base, *([node.module] if node.module else [])])

    Where = Literal["module", "function", "type"]

    def add(target: str, node: ast.stmt, where: Where) -> None:
        if target == "m3agent" or target.startswith("m3agent."):
            found.append(Import(module, target, node.lineno, where))

    def visit(node: ast.AST, where: Where) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for typed in child.body:
                    visit_node(typed, "type")
                for other in child.orelse:
                    visit_node(other, where)
            else:
                visit_node(child, where)

    def visit_node(child: ast.AST, where: Where) -> None:
        if isinstance(child, ast.Import):
            for alias in child.names:
                add(alias.name, child, where)
        elif isinstance(child, ast.ImportFrom):
            base = absolute(child)
            submodules = [f"{base}.{a.name}" for a in child.names if f"{base}.{a.name}" in known]
            if len(submodules) < len(child.names):
                add(base, child, where)
            for target in submodules:
                add(target, child, where)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            match = _REGISTRY_TARGET.match(child.value)
            if match:
                found.append(Import(module, match.group(1), child.lineno, "registry"))
        else:
            inside = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, "function" if inside and where == "module" else where)

    visit(ast.parse(source), "module")
    return found


def _all_imports() -> list[Import]:
    modules = _modules()
    return [i for name, (path, is_package) in modules.items()
            for i in imports_of(name, path.read_text(encoding="utf-8"), is_package=is_package, known=modules)]


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the longest declared name that is ``module`` or a package above it."""
    matches = [(len(name), index) for index, names in enumerate(LAYERS) for name in names
               if module == _full(name) or (name and module.startswith(_full(name) + "."))]
    return max(matches)[1] if matches else None


def _full(name: str) -> str:
    return f"m3agent.{name}" if name else "m3agent"


def violations(imports: Sequence[Import]) -> list[str]:
    """Each import of a higher layer, as ``importer:line -> target``."""
    bad = []
    for i in imports:
        low, high = layer_of(i.importer), layer_of(i.target)
        if low is not None and high is not None and high > low:
            bad.append(f"{i.importer}:{i.line} -> {i.target} (layer {low} imports layer {high})")
    return bad


def cycles(imports: Sequence[Import], modules: Sequence[str]) -> list[list[str]]:
    """The import cycles: each strongly connected group of modules (Tarjan), sorted. Registry entries are not
    edges: a registry loads its module on first use, from a caller whose imports have finished."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for i in imports:
        if i.where == "registry":
            continue
        target = _owner(i.target, graph)
        if target is not None and target != i.importer:
            graph[i.importer].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            connect(node)
    return sorted(groups)


def _owner(target: str, modules: Mapping[str, object]) -> str | None:
    """``target`` or the nearest module above it (``from m3agent.llm import ChatModel`` names the package)."""
    while target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target if target in modules else None


def _described(group: list[str], imports: Sequence[Import]) -> Iterator[str]:
    members = set(group)
    for i in imports:
        if i.where != "registry" and i.importer in members and i.target in members and i.importer != i.target:
            note = {"function": " (in a function)", "type": " (for types only)"}.get(i.where, "")
            yield f"{i.importer}:{i.line} -> {i.target}{note}"


# the package ---------------------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _modules() if layer_of(m) is None)
    assert unplaced == [], f"declare these in LAYERS (and docs/architecture.md): {unplaced}"


def test_no_module_imports_a_higher_layer() -> None:
    bad = violations(_all_imports())
    assert bad == [], "imports against the layer order (docs/architecture.md):\n" + "\n".join(bad)


def test_no_import_cycle_even_through_function_level_or_type_only_imports() -> None:
    """A function-level or type-only import that closes a cycle hides it rather than removing it, so it counts."""
    imports = _all_imports()
    found = cycles(imports, list(_modules()))
    described = ["\n".join(_described(group, imports)) for group in found]
    assert found == [], "import cycles:\n" + "\n\n".join(described)


MAX_MODULES = 20
"""A folder with more modules than this holds more than one concern: it gets sub-packages (issue 47)."""


def test_no_folder_holds_more_than_twenty_modules() -> None:
    counts: dict[Path, int] = {}
    for path in PACKAGE.rglob("*.py"):
        counts[path.parent] = counts.get(path.parent, 0) + 1
    crowded = {str(folder.relative_to(PACKAGE)): n for folder, n in counts.items() if n > MAX_MODULES}
    assert crowded == {}, f"split these folders into sub-packages (docs/architecture.md): {crowded}"


# the checks themselves -------------------------------------------------------------------------------------

_KNOWN = {"m3agent.control", "m3agent.control.prompts", "m3agent.store", "m3agent.store.merge_log"}


def _imports(module: str, source: str) -> list[Import]:
    return imports_of(module, source, is_package=False, known=dict.fromkeys(_KNOWN))


def test_the_layer_check_rejects_memorize_importing_control_inside_a_function_or_for_types() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from m3agent.control.prompts import PromptSet\n"  # never runs, but the type lives above memorize
        "def write():\n"
        "    from m3agent.control.prompts import load_prompt_set\n"  # what memorize did before issue 22
        "    return load_prompt_set\n"
    )
    found = _imports("m3agent.memorize.writers.local", source)
    assert found == [Import("m3agent.memorize.writers.local", "m3agent.control.prompts", 3, "type"),
                     Import("m3agent.memorize.writers.local", "m3agent.control.prompts", 5, "function")]
    assert violations(found) == [
        "m3agent.memorize.writers.local:3 -> m3agent.control.prompts (layer 4 imports layer 5)",
        "m3agent.memorize.writers.local:5 -> m3agent.control.prompts (layer 4 imports layer 5)"]
    assert violations(_imports("m3agent.control.modes.agent", "from m3agent.llm.prompts import load_prompt_set")) == []


def test_the_layer_check_reads_registry_entries_and_submodule_imports() -> None:
    registry = _imports("m3agent.llm", 'CHAT_MODELS.register("x", "m3agent.server.app:create", "")')
    assert violations(registry) == ["m3agent.llm:1 -> m3agent.server.app (layer 1 imports layer 7)"]
    found = _imports("m3agent.store.sqlite.writer", "from m3agent.store import merge_log, open_store")
    assert [i.target for i in found] == ["m3agent.store", "m3agent.store.merge_log"]
    assert violations(_imports("m3agent.settings", "from m3agent.store.location import parse_location")) == []
    assert violations(_imports("m3agent.settings", "from m3agent.store import open_store"))  # store is above


def test_the_cycle_check_finds_a_cycle_closed_inside_a_function() -> None:
    """The shape store/ had before issue 22: entities imported the writer, the writer imported entities late."""
    entities = _imports("m3agent.store.sqlite_entities", "from m3agent.store.sqlite.writer import write_bank")
    writer = _imports("m3agent.store.sqlite.writer",
                      "def merge():\n    from m3agent.store.sqlite_entities import DIALECT\n")
    modules = ["m3agent.store.sqlite_entities", "m3agent.store.sqlite.writer", "m3agent.store.sql.dialect"]
    assert cycles([*entities, *writer], modules) == [sorted(modules[:2])]
    assert cycles(entities, modules) == []


def test_the_cycle_check_finds_a_cycle_closed_by_a_type_only_import() -> None:
    """The shape perception/ had before issue 47: asr imported its gap finder, which imported asr's segment type
    under TYPE_CHECKING (the type now lives in its own module)."""
    asr = _imports("m3agent.perception.asr", "from m3agent.perception.asr_gaps import unheard")
    gaps = _imports("m3agent.perception.asr_gaps",
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from m3agent.perception.asr import Seg\n")
    modules = ["m3agent.perception.asr", "m3agent.perception.asr_gaps"]
    assert [i.where for i in gaps] == ["type"]
    assert cycles([*asr, *gaps], modules) == [modules]
    assert cycles(asr, modules) == []


# the documents ---------------------------------------------------------------------------------------------

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
NAME_COLUMN = 39
"""Width of the names column of the layer diagram in docs/architecture.md."""


def diagram_layers(text: str) -> list[set[str]]:
    """The rows of the layer diagram (the first code block), lowest first: a row starts with one space before its
    first name, its continuation lines with three; the text right of the names column is description."""
    block = text.split("```", 2)[1].splitlines()[1:]
    rows: list[set[str]] = []
    for line in block:
        names = {n for n in line[:NAME_COLUMN].replace("·", " ").split()}
        if not names:
            continue
        if line.startswith(" ") and not line.startswith("   "):
            rows.append(names)
        else:
            rows[-1] |= names
    return rows[::-1]


def test_the_layer_diagram_of_architecture_md_is_the_layer_order() -> None:
    drawn = diagram_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    declared = [set(names) - {""} for names in LAYERS]
    assert drawn == declared, "docs/architecture.md's diagram and LAYERS differ"


def test_architecture_md_names_every_sub_package() -> None:
    """Each folder of a top-level package appears in "Where things live" as ``folder/`` (or its own section)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    folders = sorted(str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.glob("*/*/__init__.py"))
    missing = [f for f in folders if f"`{f.split('/')[1]}/`" not in text and f"`{f}/`" not in text]
    assert missing == [], f"describe these sub-packages in docs/architecture.md: {missing}"
