"""Plain-text tables whose columns line up whatever the size of a figure.

``scheduler status``, ``scheduler history`` and the simulator's tables (``scheduler simulate``)
print their rows through :func:`format_table`: every column is as wide as its widest cell
(the heading included), and two spaces separate two columns, so that no two figures touch
however large they grow (a 10,000-job trace's mean wait of 2,393,306.5 s beside a
turnaround of 66,502.48 s).  Cells are formatted by the caller; this module only pads them.

    head  ("ID", "NAME", "WAIT_S")        widths = max(len(cell)) per column
    rows  [("1", "uts", "2393306.5"), …]  ─►  "ID  NAME     WAIT_S"
    align ">", "<", ">"                       " 1  uts   2393306.5"
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GAP", "format_table"]

GAP = "  "
"""What separates two columns (two spaces)."""


def format_table(head: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> list[str]:
    """The lines of a table: ``head`` then ``rows``, each column padded to its widest cell.

    Args:
        head: the column headings.
        rows: the rows, one cell per column (``str(cell)`` is printed; ``None`` prints ``-``).
        align: one character per column, ``"<"`` (left) or ``">"`` (right), e.g. ``"><>>"``;
            the last column is not padded on the right when it is left-aligned.

    Returns:
        The lines (no trailing spaces), the heading first.

    Raises:
        ValueError: ``align`` or a row does not have one entry per column, or ``align`` holds
            something other than ``<`` and ``>``.
    """
    if len(align) != len(head) or set(align) - {"<", ">"}:
        raise ValueError(f"align needs one of '<' '>' per column ({len(head)}), got {align!r}")
    cells = [list(head)]
    for row in rows:
        if len(row) != len(head):
            raise ValueError(f"a row has {len(row)} cells, the table {len(head)} columns: "
                             f"{row!r}")
        cells.append(["-" if c is None else str(c) for c in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return [GAP.join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip()
            for r in cells]
