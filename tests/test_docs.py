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


README_LIMIT_CHARS = 12_000
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def _first_code_block(text: str) -> str:
    start = text.index("```")
    body_start = text.index("\n", start) + 1
    return text[body_start:text.index("```", body_start)]


def _ci_test_command() -> str:
    lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if "pytest" in line and not line.startswith("#")]
    assert len(lines) == 1, f".ci/run should run pytest on exactly one line, not {lines}"
    return lines[0].strip()


def test_the_readme_opens_with_the_demo_and_the_test_command_ci_runs() -> None:
    block = _first_code_block((ROOT / "README.md").read_text(encoding="utf-8"))
    commands = [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) == 2, commands
    demo, tests = commands
    assert demo.endswith("vastui demo --headless"), demo
    assert tests == _ci_test_command()


def test_the_readme_stays_a_page_for_users() -> None:
    """Results live in docs/benchmarks.md and history in CHANGELOG.md, so the README stays short."""
    size = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert size <= README_LIMIT_CHARS, f"README.md has {size:,} characters; keep it to {README_LIMIT_CHARS:,}"
    for page in ("docs/benchmarks.md", "CHANGELOG.md"):
        assert (ROOT / page).is_file(), page


def _anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` that names no file, or a heading its Markdown target lacks, as ``link (why)``."""
    broken: list[str] = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue                                        # http(s), mailto: not checked offline
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md":
            anchors = {_anchor(h) for h in HEADING.findall(linked.read_text(encoding="utf-8"))}
            if anchor not in anchors:
                broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md",
             *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)}: {line}" for page in pages for line in _broken_links(page)]
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    """The guard itself can fail: a link to an absent page, or to a heading the page lacks, is reported."""
    assert _anchor("Teardown is a pass/fail test") == "teardown-is-a-passfail-test"
    assert _anchor("The console (`tui/`)") == "the-console-tui"
    (tmp_path / "method.md").write_text("# The method\n\n## Objective\n", encoding="utf-8")
    probe = tmp_path / "probe.md"
    probe.write_text("[a](absent.md) [b](method.md#no-such-heading) [c](method.md#objective) [d](https://x.y)\n",
                     encoding="utf-8")
    assert _broken_links(probe) == ["absent.md (no such file)", "method.md#no-such-heading (no such heading)"]
