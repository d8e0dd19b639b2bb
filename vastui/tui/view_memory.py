"""What the console remembers of each view across restarts: its filter and its sort, nothing else.

One small JSON file in the platform config directory (``console-views.json``), written whenever a view's filter
or sort changes. It never holds a secret: a filter is a marketplace query, a sort a column name. A file that cannot
be read or written costs the memory, never the console: it is logged and the defaults are used.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "console-views.json"


@dataclass(frozen=True, slots=True)
class ViewMemo:
    filter: str = ""
    sort: str | None = None
    reverse: bool = False


def _memo(raw: object) -> ViewMemo | None:
    if not isinstance(raw, dict):
        return None
    text, sort, reverse = raw.get("filter", ""), raw.get("sort"), raw.get("reverse", False)
    if not isinstance(text, str) or not (sort is None or isinstance(sort, str)) or not isinstance(reverse, bool):
        return None
    return ViewMemo(filter=text, sort=sort, reverse=reverse)


class ViewMemory:
    """Per-view memos kept in ``path`` (None: remembered for this run only, as in tests and previews)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memos: dict[str, ViewMemo] = {}
        if path is not None:
            self._memos = self._read(path)

    @staticmethod
    def _read(path: Path) -> dict[str, ViewMemo]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("the console's view memory %s is unreadable (%s); starting from the defaults", path, exc)
            return {}
        views = data.get("views") if isinstance(data, dict) else None
        if not isinstance(views, dict):
            return {}
        return {name: memo for name, raw in views.items() if (memo := _memo(raw)) is not None}

    def recall(self, view: str) -> ViewMemo:
        return self._memos.get(view, ViewMemo())

    def remember(self, view: str, memo: ViewMemo) -> None:
        if self._memos.get(view) == memo:
            return
        self._memos[view] = memo
        if self.path is not None:
            self._write(self.path)

    def _write(self, path: Path) -> None:
        text = json.dumps({"views": {name: asdict(m) for name, m in sorted(self._memos.items())}}, indent=1)
        temp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(text + "\n", encoding="utf-8")
            os.replace(temp, path)
        except OSError as exc:
            log.warning("the console's view memory %s could not be written (%s)", path, exc)
