"""List the symbols defined in vastui/ that nothing outside tests/ uses.

A symbol is a top-level function, class or constant of a module, a member of an enum, or a method of a top-level
class. It counts as used when its name is read anywhere in vastui/, benchmarks/ or scripts/ other than in its own
definition: as a bare name (``f(...)``, ``Foo``, a string annotation) or as an attribute (``x.f``, ``Action.RENT``).
Imports alone do not count, so a re-export that nobody reads is not a use (an import under another name counts, and
so does a string that spells the name: getattr and lazy import tables). The match is by name, not by type, so a
method is used when any ``.name`` of the same spelling is read: that errs towards "used" (a read inside any
definition of the same name is taken for that definition's own, the one way it errs the other way).

Also counted as used: the members of an enum that is built from a value somewhere (``Status(text)``: any member
may arrive from the marketplace, the store or a command line), the console script's entry point (pyproject.toml),
dunder names, methods that a framework or a standard base class calls by name (the class's non-vastui bases define
the name, e.g. Textual's ``compose``, ``on_mount``, ``render``), Textual's naming conventions (``on_*``,
``action_*``, ``watch_*``, ``validate_*``, ``compute_*``, ``key_*``) and ``@on(...)`` handlers.

Uses in tests/ count only for the packages in ``DRIVEN_BY_TESTS`` (the simulator); ``ALLOWED`` names the true
false positives. Run from anywhere: ``python scripts/unused_symbols.py``; exit status 1 when it lists anything.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "vastui"
USER_DIRS = ("vastui", "benchmarks", "scripts")
TEXTUAL_PREFIXES = ("on_", "action_", "watch_", "validate_", "compute_", "key_", "_watch_", "_validate_")
ENUM_BASES = {"Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"}

# Packages whose callers include the tests by design, each with its reason: there a use in tests/ counts too.
DRIVEN_BY_TESTS: dict[str, str] = {
    "vastui.sim": "the simulated marketplace exists to be driven by the tests and the demo: its controls and "
                  "oracles for tests (cut a host's next command, reseed chaos, read the true charges) are its job",
}

# True false positives, each with its reason: "module:qualified.name".
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition: where it is, what kind it is, and the name a use would read."""

    module: str
    qualname: str
    name: str
    kind: str
    path: Path
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)
    return names


def assigned_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def definitions(path: Path) -> list[Symbol]:
    tree = ast.parse(path.read_text(), filename=str(path))
    module = module_name(path)
    found: list[Symbol] = []

    def add(qualname: str, name: str, kind: str, node: ast.AST) -> None:
        found.append(Symbol(module, qualname, name, kind, path, getattr(node, "lineno", 0)))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            add(node.name, node.name, "function", node)
        elif isinstance(node, ast.ClassDef):
            add(node.name, node.name, "class", node)
            is_enum = bool(base_names(node) & ENUM_BASES)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    if "on" in decorator_names(item) or "overload" in decorator_names(item):
                        continue
                    add(f"{node.name}.{item.name}", item.name, "method", item)
                elif is_enum:
                    for name in assigned_names(item):
                        add(f"{node.name}.{name}", name, "enum member", item)
        else:
            for name in assigned_names(node):
                add(name, name, "constant", node)
    return found


class UseCollector(ast.NodeVisitor):
    """Every name and attribute read in a module, leaving out each definition's reads of its own name."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.called: set[str] = set()   # names called as ``Name(...)``: for an enum, parsing a value
        self._inside: list[str] = []

    def _read(self, name: str) -> None:
        if name not in self._inside:
            self.names.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Store):
            self._read(node.id)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            self.called.add(node.func.id)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # ``from m import f as _f`` reads ``f`` under another name; the reads of ``_f`` are not reads of ``f``.
        for alias in node.names:
            if alias.asname is not None and alias.asname != alias.name:
                self._read(alias.name)

    def visit_Constant(self, node: ast.Constant) -> None:
        # A string that spells an identifier may name it for getattr or a lazy import table (cli.py's commands).
        if isinstance(node.value, str) and node.value.isidentifier():
            self._read(node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._read(node.attr)
        self.generic_visit(node)

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._inside.append(node.name)
        self.generic_visit(node)
        self._inside.pop()

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def
    visit_ClassDef = _visit_def

    def visit_arg(self, node: ast.arg) -> None:
        self._annotation(node.annotation)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def _annotation(self, node: ast.expr | None) -> None:
        if node is None:
            return
        self.visit(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    self.visit(ast.parse(sub.value, mode="eval"))
                except SyntaxError:
                    continue

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            self._annotation(node.returns)
            for field, value in ast.iter_fields(node):
                if field == "returns":
                    continue
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, ast.AST):
                        self.visit(child)
            return
        super().generic_visit(node)


def entry_points() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {target.rsplit(":", 1)[1] for target in project.get("scripts", {}).values()}


def framework_names(symbol: Symbol) -> bool:
    """True when a non-vastui base of the symbol's class defines the method (the framework calls it)."""
    class_name = symbol.qualname.split(".")[0]
    cls = getattr(importlib.import_module(symbol.module), class_name, None)
    if not inspect.isclass(cls):
        return False
    for base in cls.__mro__[1:]:
        if not base.__module__.startswith(PACKAGE) and symbol.name in vars(base):
            return True
    return False


def is_exempt(symbol: Symbol, parsed_enums: set[str]) -> bool:
    name = symbol.name
    if symbol.kind == "enum member" and symbol.qualname.split(".")[0] in parsed_enums:
        return True
    if name.startswith("__") and name.endswith("__"):
        return True
    if symbol.kind == "method" and (name.startswith(TEXTUAL_PREFIXES) or framework_names(symbol)):
        return True
    return f"{symbol.module}:{symbol.qualname}" in ALLOWED


def python_files(directory: str) -> list[Path]:
    this_script = Path(__file__).resolve()   # its own strings ("method", "class", ...) are no uses
    return sorted(p for p in (ROOT / directory).rglob("*.py") if ".venv" not in p.parts and p != this_script)


def collect(directories: tuple[str, ...]) -> UseCollector:
    collector = UseCollector()
    for directory in directories:
        for path in python_files(directory):
            collector.visit(ast.parse(path.read_text(), filename=str(path)))
    return collector


def is_driven_by_tests(symbol: Symbol) -> bool:
    return any(symbol.module == p or symbol.module.startswith(p + ".") for p in DRIVEN_BY_TESTS)


def unused() -> list[Symbol]:
    sys.path.insert(0, str(ROOT))
    collector = collect(USER_DIRS)
    tests = collect(("tests",))
    used = collector.names | entry_points()
    symbols = [s for path in python_files(PACKAGE) for s in definitions(path)]
    return [s for s in symbols if s.name not in used and not is_exempt(s, collector.called)
            and not (is_driven_by_tests(s) and s.name in tests.names)]


def main() -> int:
    found = unused()
    for symbol in found:
        print(f"{symbol.path.relative_to(ROOT)}:{symbol.line}: unused {symbol.kind} {symbol.qualname}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
