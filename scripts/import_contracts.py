"""Two import-linter contract types the built-in ones cannot express (registered in pyproject.toml, contract_types).

``acyclic``: no import cycle among the modules of a package, whatever the depth, counting every import grimp sees
(function-local and ``TYPE_CHECKING`` ones included). The built-in ``acyclic_siblings`` compares sibling packages:
it flags package-level loops that are not module cycles, and it cannot see a package's ``__init__`` importing a
child that imports the package back (``vastui.cli`` ↔ ``vastui.cli.console`` was one).

``pure``: a package imports only the standard library, itself and the modules named as allowed, and only the modules
named as its loaders touch files (``open``, ``Path.read_text``, ``os.*``, ``shutil``, ...). Imports come from grimp;
file access is read from each module's syntax tree, since no import graph shows an ``open()`` call.
docs/architecture.md, Dependency rules, says what each contract protects.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck
from importlinter.domain.helpers import module_expressions_to_modules
from importlinter.domain.imports import ImportExpression, Module, ModuleExpression

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ImportLine:
    importer: str
    imported: str
    line_number: int
    line_contents: str

    def describe(self) -> str:
        return f"{self.importer} -> {self.imported} (l. {self.line_number}: {self.line_contents})"


def _parsed(value: object, kind: type[T]) -> list[T]:
    """A contract field's parsed value (a set, or None when the option was left out), checked item by item: the
    fields are class attributes, so their parsed values have no static type of their own."""
    items: list[object] = list(value) if isinstance(value, (set, frozenset, list)) else [] if value is None else [value]
    checked: list[T] = []
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(f"expected {kind.__name__} values, got {value!r}")
        checked.append(item)
    return checked


def _first_line(graph: grimp.ImportGraph, importer: str, imported: str) -> ImportLine:
    details = graph.get_import_details(importer=importer, imported=imported)
    if not details:  # an import grimp knows without details (never seen for source files; kept honest anyway)
        return ImportLine(importer, imported, 0, "?")
    first = min(details, key=lambda detail: int(detail["line_number"]))
    return ImportLine(importer, imported, int(first["line_number"]), str(first["line_contents"]))


# --- cycles ---------------------------------------------------------------------------------------------------------


def strongly_connected(nodes: Iterable[str], edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's components of size two or more, plus any node that imports itself; each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        # iterative, so a long chain of imports cannot reach Python's recursion limit
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(edges.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle(start: str, members: set[str], edges: Mapping[str, Iterable[str]]) -> list[str]:
    """The shortest path start -> ... -> start inside one component (breadth first), as a list of modules."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for step in sorted(edges.get(node, ())):
                if step == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if step in members and step not in parents:
                    parents[step] = node
                    following.append(step)
        frontier = following
    raise ValueError(f"{start} is on no cycle")


class AcyclicContract(Contract):
    """No module of ``containers`` (or below them) reaches itself through imports."""

    type_name = "acyclic"

    containers = fields.SetField(subfield=fields.ModuleExpressionField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        ignore = sorted(_parsed(self.ignore_imports, ImportExpression), key=str)
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=ignore, unmatched_alerting=AlertLevel.ERROR)
        expressions = sorted(_parsed(self.containers, ModuleExpression), key=str)
        roots = {module.name for module in module_expressions_to_modules(graph, expressions, raise_if_unmatched=True)}
        nodes = set(roots)
        for root in roots:
            nodes |= graph.find_descendants(root)
        edges = {node: graph.find_modules_directly_imported_by(node) & nodes for node in nodes}
        cycles: list[list[ImportLine]] = []
        for component in strongly_connected(nodes, edges):
            path = shortest_cycle(component[0], set(component), edges)
            cycles.append([_first_line(graph, a, b) for a, b in zip(path, path[1:], strict=False)])
        return ContractCheck(kept=not cycles, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(f"A cycle through {cycle[0].importer}:")
            for line in cycle:
                output.indent_cursor()
                output.print_error(line.describe(), bold=False)
            output.new_line()


# --- purity ---------------------------------------------------------------------------------------------------------

# Calls that touch the file system, by the dotted name they resolve to through the module's imports.
FILE_CALLS = frozenset({"open", "io.open"})
# Every call into these modules touches files (or the process's descriptors).
FILE_MODULES = frozenset({"os", "shutil", "tempfile", "glob", "fileinput", "mmap"})
# ... except these pure name manipulations of os.path.
PURE_OS = frozenset({"os.path.join", "os.path.basename", "os.path.dirname", "os.path.split", "os.path.splitext",
                     "os.path.normpath", "os.path.isabs", "os.fspath", "os.fsencode", "os.fsdecode"})
# Methods of pathlib.Path that reach the disk; a call of any of these names counts, whatever it is called on
# (``gzip.open`` and ``zipfile.Path(...).open`` as well): a false alarm is cheaper than a missed read.
FILE_METHODS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes", "touch", "unlink",
                          "mkdir", "rmdir", "iterdir", "glob", "rglob", "stat", "lstat", "exists", "is_file",
                          "is_dir", "is_symlink", "symlink_to", "hardlink_to", "chmod", "readlink", "samefile",
                          "resolve"})


@dataclass(frozen=True, slots=True)
class FileAccess:
    module: str
    line_number: int
    call: str

    def describe(self) -> str:
        return f"{self.module} l. {self.line_number}: {self.call}(...)"


def _dotted(node: ast.expr, aliases: Mapping[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def file_accesses(source: str, *, module: str) -> list[FileAccess]:
    """Each call in ``source`` that reads, writes, lists or inspects files (FILE_CALLS, FILE_MODULES, FILE_METHODS)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found: list[FileAccess] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        is_module_call = name is not None and name.split(".")[0] in FILE_MODULES and name not in PURE_OS
        if name in FILE_CALLS or is_module_call or method in FILE_METHODS:
            found.append(FileAccess(module, node.lineno, name or f"(…).{method}"))
    return found


def _source_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"no source found for {module}")
    return Path(spec.origin).read_text(encoding="utf-8")


class PurePackageContract(Contract):
    """``source`` imports only the standard library, itself and ``allowed_modules``; only ``loaders`` touch files."""

    type_name = "pure"

    source = fields.ModuleField()
    allowed_modules = fields.SetField(subfield=fields.ModuleField(), required=False)
    loaders = fields.SetField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        [source] = [module.name for module in _parsed({self.source}, Module)]
        allowed = {module.name for module in _parsed(self.allowed_modules, Module)}
        loaders = {module.name for module in _parsed(self.loaders, Module)}
        members = {source} | graph.find_descendants(source)
        missing = sorted((allowed | loaders) - set(graph.modules))
        if missing:
            raise ValueError(f"contract {self.name!r} names modules that do not exist: {', '.join(missing)}")
        bad_imports: list[ImportLine] = []
        for importer in sorted(members):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if not _may_import(imported, members=members, allowed=allowed):
                    bad_imports.append(_first_line(graph, importer, imported))
        bad_files = [access for module in sorted(members - loaders)
                     for access in file_accesses(_source_of(module), module=module)]
        return ContractCheck(kept=not bad_imports and not bad_files,
                             metadata={"imports": bad_imports, "files": bad_files})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["imports"]:
            output.print_error(f"{line.describe()}: neither the standard library nor an allowed module", bold=False)
        for access in check.metadata["files"]:
            output.print_error(f"{access.describe()}: file access outside the named loaders", bold=False)


def _may_import(imported: str, *, members: set[str], allowed: set[str]) -> bool:
    top = imported.split(".")[0]
    if imported in members or top in sys.stdlib_module_names or top == "__future__":
        return True
    return any(imported == module or imported.startswith(module + ".") for module in allowed)
