"""Where the ``.tcss`` themes live and which ones exist.

The themes are top-level ``themes/*.tcss`` in the source tree, shipped inside the wheel as data files
(``share/vastui/themes``).
Each file scopes its rules under ``App.theme-<name>`` so all of them load at once and switching is a class flip.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

from vastui.errors import ConfigError

BASE_THEME = {"dark": "textual-dark", "light": "textual-light"}


def theme_dirs() -> list[Path]:
    """Where themes may be, in order: the source tree's ``themes/`` (a checkout or an editable install), then the
    wheel's data directory under each install scheme (``share/vastui/themes``)."""
    dirs = [Path(__file__).resolve().parents[2] / "themes"]
    schemes = [sysconfig.get_default_scheme(), f"{os.name}_user"]
    for scheme in schemes:
        try:
            dirs.append(Path(sysconfig.get_path("data", scheme)) / "share" / "vastui" / "themes")
        except KeyError:
            continue
    return dirs


def themes_dir() -> Path:
    """The first place that holds at least one ``.tcss`` theme."""
    dirs = theme_dirs()
    return next((d for d in dirs if d.is_dir() and any(d.glob("*.tcss"))), dirs[0])


def theme_names() -> tuple[str, ...]:
    return tuple(sorted(path.stem for path in themes_dir().glob("*.tcss")))


def theme_paths() -> list[Path]:
    return sorted(themes_dir().glob("*.tcss"))


def check_theme(name: str) -> str:
    """``name`` if a theme file of that name exists, else a ConfigError listing the ones that do."""
    names = theme_names()
    if name not in names:
        raise ConfigError(f"no theme {name!r}; the themes are: {', '.join(names) or 'none found'}",
                          title="Unknown theme")
    return name
