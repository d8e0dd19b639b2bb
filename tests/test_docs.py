"""The project documents itself: code, tests, benchmarks and the README point at ``docs/``, never outside the repo."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "vastui", ROOT / "tests", ROOT / "benchmarks", ROOT / "README.md"]
# Design sources that once lived outside the repository; spelled in parts so this file does not name them itself.
OUTSIDE_NAMES = tuple(stem + ".md" for stem in ("DESIGN", "METHOD", "STYLE", "vast" + "-api", "gpu" + "-market"))
OUTSIDE_PATTERN = re.compile("|".join(re.escape(name) for name in OUTSIDE_NAMES) + r"|/work/" + "shared")
DOCS_REFERENCE = re.compile(r"docs/([a-z0-9_-]+\.md)")


def _scanned_files() -> list[Path]:
    files: list[Path] = []
    for place in SCANNED:
        if place.is_file():
            files.append(place)
            continue
        files.extend(p for p in sorted(place.rglob("*"))
                     if p.is_file() and p.suffix in {".py", ".md", ".toml", ".tcss", ".txt", ".sh"}
                     and "__pycache__" not in p.parts)
    return files


def test_nothing_points_at_design_files_outside_the_repository() -> None:
    hits = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in _scanned_files()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if OUTSIDE_PATTERN.search(line)]
    assert not hits, "these lines point outside the repository (point at docs/ instead):\n" + "\n".join(hits)


def test_every_docs_page_the_code_names_exists() -> None:
    named = {match.group(1) for path in _scanned_files()
             for match in DOCS_REFERENCE.finditer(path.read_text(encoding="utf-8"))}
    assert {"architecture.md", "method.md", "api-notes.md"} <= named
    missing = sorted(name for name in named if not (ROOT / "docs" / name).is_file())
    assert not missing, f"docs pages named in the code but absent: {missing}"


def test_the_pattern_catches_an_outside_reference() -> None:
    """The guard itself can fail: each outside name, and the shared folder, is caught."""
    for name in OUTSIDE_NAMES:
        assert OUTSIDE_PATTERN.search(f"see {name} for the reason")
    assert OUTSIDE_PATTERN.search("/work/" + "shared/notes")
    assert not OUTSIDE_PATTERN.search("see docs/method.md, Shortlist")
