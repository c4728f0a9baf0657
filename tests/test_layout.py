"""The library's layout shows its architecture: no import circle, the book's machinery apart, modules a reader can hold.

The graph counts every import the source writes, at the top of a module or inside a function (a lazy
import hides a circle from Python, not from a reader): ``attnbook.book.edition`` importing
``attnbook.book.config`` is an edge, and so is ``from . import corpus`` inside ``attnbook.data``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: The longest a module of ``attnbook.exercises`` may be, in lines (issue: one job per module, read in one sitting).
EXERCISE_MODULE_LINES = 500


def modules(src: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} for every module of ``package`` under ``src``."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """{module: the modules of ``package`` it imports}, from the source (every import statement, lazy ones too)."""
    mods = modules(src, package)

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, (path, is_package) in mods.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`, the module mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found = owner(target)
                    if found and found != name:
                        graph[name].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_library_has_no_import_circle():
    found = circles(import_graph(SRC, "attnbook"))
    assert not found, "modules that import each other, directly or through others (untie them): " + "; ".join(
        " <-> ".join(group) for group in found
    )


def test_the_circle_finder_finds_a_lazy_circle_and_a_relative_one(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")  # lazy, as book <-> edition was
    (pkg / "b.py").write_text("import pkg.a\n")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text("from .d import x\n")
    (pkg / "sub" / "d.py").write_text("from ..sub import c\nx = 1\n")
    (pkg / "e.py").write_text("from pkg import a\n")  # one way only: no circle
    assert circles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]


def test_the_books_machinery_stands_apart_from_the_chapters():
    graph = import_graph(SRC, "attnbook")
    machinery = {name for name in graph if name == "attnbook.book" or name.startswith("attnbook.book.")}
    assert {
        "attnbook.book.config",
        "attnbook.book.edition",
        "attnbook.book.claims",
        "attnbook.book.sphinx",
    } <= machinery
    leaning = sorted(name for name in set(graph) - machinery if graph[name] & machinery)
    assert not leaning, f"chapter modules that import the book's machinery (it must not ship in their way): {leaning}"


@pytest.mark.parametrize("name", sorted(p.name for p in (SRC / "attnbook" / "exercises").glob("*.py")))
def test_each_exercises_module_is_read_in_one_sitting(name):
    lines = len((SRC / "attnbook" / "exercises" / name).read_text(encoding="utf-8").splitlines())
    assert lines <= EXERCISE_MODULE_LINES, (
        f"attnbook/exercises/{name} has {lines} lines (at most {EXERCISE_MODULE_LINES}): split it by job"
    )


# --- names: the table in the package's documentation, held true for the public signatures -----------------------

#: Modules whose parameters are the command line's flags, named as the flags are (the table says so).
FLAG_MODULES = ("attnbook.translate.settings",)


def naming_table() -> list[tuple[str, list[str]]]:
    """(name, [spellings not to use]) for each row of the table in ``attnbook.__doc__``."""
    import attnbook

    rows, inside = [], 0
    for line in attnbook.__doc__.splitlines():
        if line.startswith("====="):
            inside += 1
            continue
        if inside == 2 and line.strip():  # between the rule under the header and the closing rule
            cells = line.split()
            rows.append((cells[0], [cells[-1]]))
    return rows


def public_parameters() -> dict[str, list[tuple[str, object]]]:
    """{parameter name: [(where, default)]} over the public functions, classes and methods of the library."""
    import importlib
    import inspect
    import pkgutil

    import attnbook

    found: dict[str, list[tuple[str, object]]] = {}
    for info in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
        if info.name.startswith("attnbook.book"):  # the book's machinery has no learner-facing signatures
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            members = [(name, obj)]
            if inspect.isclass(obj):  # its methods, inherited ones too, that the library defines (not PyTorch's)
                members += [
                    (f"{name}.{attr}", value)
                    for attr, value in inspect.getmembers(obj, callable)
                    if (not attr.startswith("_") or attr in ("__init__", "__call__"))
                    and str(getattr(value, "__module__", "") or "").startswith("attnbook")
                ]
            for where, member in members:
                try:
                    signature = inspect.signature(member)
                except (TypeError, ValueError):
                    continue
                for parameter in signature.parameters.values():
                    found.setdefault(parameter.name, []).append((f"{module.__name__}.{where}", parameter.default))
    return found


def test_the_naming_table_is_read_whole():
    table = dict(naming_table())
    assert {"need_weights", "key_padding_mask", "is_causal", "scheduler", "max_len", "beam_size"} <= set(table)
    assert table["is_causal"] == ["causal"]


@pytest.mark.parametrize("name,avoided", naming_table())
def test_each_concept_has_the_tables_name_in_every_public_signature(name, avoided):
    parameters = public_parameters()
    assert name in parameters, f"the table names {name!r}, but no public signature uses it: update the table"
    for spelling in avoided:
        users = [where for where, _ in parameters.get(spelling, []) if not where.startswith(FLAG_MODULES)]
        assert not users, f"{spelling!r} is spelled {name!r} in this library (attnbook's naming table): {users}"


def test_greedy_decoding_is_a_beam_of_one_everywhere():
    defaults = public_parameters()["beam_size"]
    assert defaults and all(default is not None for _, default in defaults), (
        f"greedy is beam_size=1, never None: {[where for where, default in defaults if default is None]}"
    )
