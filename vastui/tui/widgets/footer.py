"""The key footer, fitted to the terminal's width: no key hint is ever cut off at the right edge.

Textual's ``Footer`` lays the live keys out in a row and cuts what does not fit (at 80 columns the Instances view
lost its last keys mid-word, and an approval key, listed last, was never seen). This footer keeps Textual's look
while everything fits. When it does not, it turns compact (less padding), shortens the long labels (``SHORT``), and
then leaves out whole hints, least useful first (``rank``): the palette key, refresh, the view menu, then the
view's own keys from the last declared. The approval keys and ``?`` (help, which lists every key of the view) are
never left out, so ``a``/``x``/``^a`` show at 80 columns whenever something waits for an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# labels that have a short form for a compact footer
SHORT: dict[str, str] = {
    "Approve oldest": "Approve", "Refuse oldest": "Refuse", "Approve plan": "Plan", "Approvals": "Approvals",
    "Sort: next column": "Sort", "Reverse sort": "Reverse", "Rent marked": "Rent", "Copy ssh": "ssh",
    "Transfer credit": "Transfer", "Refresh": "Refresh",
}
KEEP = 0          # never left out
# how soon a hint is left out when the row is too narrow (higher: sooner); a view's own keys rank VIEW_KEYS
RANK: dict[str, int] = {
    "approve_oldest": KEEP, "refuse_oldest": KEEP, "approvals": KEEP, "help": KEEP,
    "approve_plan": 1, "quit": 2, "open_command": 4, "refresh": 5,
}
VIEW_KEYS = 3
PALETTE_WIDTH = 12   # "▏^p palette" with its border and padding


@dataclass(frozen=True, slots=True)
class Hint:
    """One key hint: what the footer shows for one action."""

    key_display: str
    label: str
    action: str

    def width(self, *, compact: bool) -> int:
        """Cells it takes: the key (padded both sides, or not at all when compact) and its label."""
        label = SHORT.get(self.label, self.label) if compact else self.label
        return cell_len(self.key_display) + cell_len(label) + (2 if compact else 3)


def rank(hint: Hint) -> int:
    return RANK.get(hint.action, VIEW_KEYS)


def fit_hints(hints: Sequence[Hint], width: int) -> tuple[tuple[Hint, ...], bool, bool]:
    """The hints that fit ``width`` cells, in their order; whether the row is compact; whether the palette key
    fits beside them. Nothing is left out while the full row fits; then compact, then hints go, least useful
    first (the last of equal rank first), never those ranked ``KEEP``."""
    if sum(h.width(compact=False) for h in hints) + PALETTE_WIDTH <= width:
        return tuple(hints), False, True
    kept = list(hints)
    total = sum(h.width(compact=True) for h in kept)
    if total + PALETTE_WIDTH <= width:
        return tuple(kept), True, True
    by_doom = sorted((h for h in kept if rank(h) != KEEP), key=lambda h: (rank(h), kept.index(h)), reverse=True)
    for hint in by_doom:
        if total <= width:
            break
        kept.remove(hint)
        total -= hint.width(compact=True)
    return tuple(kept), True, False


class FittingFooter(Footer):
    """Textual's footer, with the live keys fitted to the width (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._laid_out_for = 0

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self.size.width or self.app.size.width
        self._laid_out_for = width
        active = self.screen.active_bindings
        bindings: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in bindings:
                bindings[binding.action] = (binding, enabled, tooltip)
        hints = [Hint(self.app.get_key_display(b), b.description, action) for action, (b, _, _) in bindings.items()]
        kept, compact, palette = fit_hints(hints, width)
        self.compact = compact
        for hint in kept:
            binding, enabled, tooltip = bindings[hint.action]
            label = SHORT.get(hint.label, hint.label) if compact else hint.label
            yield FooterKey(binding.key, hint.key_display, label, binding.action, disabled=not enabled,
                            tooltip=tooltip or binding.description).data_bind(compact=Footer.compact)
        if palette and self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, binding, enabled, tooltip = found
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                                classes="-command-palette", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._laid_out_for and self._bindings_ready:
            self.call_after_refresh(self.recompose)
