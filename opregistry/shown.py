"""How a result shows itself where a user meets it: ``str()`` is its table (as the
command prints it), a notebook (Jupyter, Colab) shows its markdown table, ``repr()`` is
one short line with its summary. The rendering stays in ``formats``, imported when a
result is shown (a function-level import: the one edge up the layers that
``tests/unit/test_layers.py`` allows for it)."""
from __future__ import annotations

from typing import Any

_REPR_WIDTH = 160  # characters of the summary a repr() keeps


class Shown:
    """Mixin for a result type that has a renderer (``formats.registry.RENDERERS``).
    A dataclass using it says ``repr=False``, so its ``repr()`` stays this one line."""

    __slots__ = ()

    def _shown(self) -> Any:
        """What the renderer renders (a result registered under another type says so)."""
        return self

    def __str__(self) -> str:
        """The table the command prints (its summary line when the table is empty: a
        check without findings)."""
        from opregistry.formats import render, summary

        text = render(self._shown(), "table").rstrip("\n")
        return text or summary(self._shown()) or f"{type(self).__name__}: nothing to show"

    def _repr_markdown_(self) -> str:
        """The markdown table with the summary below it (Jupyter's rich display)."""
        from opregistry.formats import render, summary

        shown = self._shown()
        said = summary(shown)
        table = render(shown, "markdown").rstrip("\n")  # every renderer has markdown
        parts = [part for part in (table, said.replace("\n", "  \n")) if part]
        return "\n\n".join(parts or [str(self)]) + "\n"

    def __repr__(self) -> str:
        from opregistry.formats import summary

        try:
            said = " ".join(summary(self._shown()).split())
        except Exception as exc:  # noqa: BLE001 - a repr never raises
            said = f"(no summary: {type(exc).__name__})"
        if len(said) > _REPR_WIDTH:
            said = said[:_REPR_WIDTH - 3] + "..."
        return f"<{type(self).__name__}: {said}>" if said else f"<{type(self).__name__}>"
