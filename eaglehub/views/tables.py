"""Tables that keep what tells their rows apart at any width: names cut in the middle, never at their end."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from eaglehub.findings import printable

ELLIPSIS = "…"
NAME_MIN_WIDTH = 20
"""The narrowest a name column gets before rich may squeeze it further: enough for ``…`` and a tensor's
distinguishing end (``self_attn.q_proj.weight`` loses only its start)."""


def abbreviate_middle(name: str, width: int, head: int) -> str:
    """``name`` in ``width`` characters: its first ``head`` characters, ``…``, and as much of its end as fits."""
    if len(name) <= width:
        return name
    head = max(0, min(head, width - 2))
    return name[:head] + ELLIPSIS + name[len(name) - (width - head - 1) :]


def fit_names(names: list[str], width: int) -> dict[str, str]:
    """How each of ``names`` (a table column's) is shown ``width`` characters wide: whole when it fits, else
    with its middle cut to ``…``. The end is what tells rows apart (``midlayer.self_attn.q_proj.weight`` and
    ``….k_proj.weight``; ``/runs/a/drafter-good`` and ``…/drafter-bad``), so the cut keeps all the end that
    fits beside the start's first component (less of the start where the shown names would not stay
    distinct); where no cut keeps them apart (or ``width`` is under 8) a name is shown whole, folded."""
    long = [n for n in dict.fromkeys(names) if len(n) > width]
    if width < 8 or not long:
        return {n: n for n in names}
    for cap in (width // 3, 4, 1, 0):
        shown = {n: abbreviate_middle(n, width, min(cap, _first_part(n))) for n in names}
        if len(set(shown.values())) == len(set(names)):
            return shown
    return {n: n for n in names}


def _first_part(name: str) -> int:
    """Length of ``name``'s first component with its separator (``midlayer.``, ``/tmp/``)."""
    for i, ch in enumerate(name[1:], 1):
        if ch in "./":
            return i + 1
    return len(name)


def names_table(
    console: Console,
    columns: list[str],
    rows: list[list],
    *,
    names: int | tuple[int, ...] = 0,
    right: tuple[str, ...] | str = (),
    title: str | None = None,
    **table_options,
) -> Table:
    """A table whose columns ``names`` hold what tells its rows apart (tensor names, drafter and report paths,
    as plain strings, not markup): the other columns get the least width that breaks none of their words,
    the name columns the rest, and names longer than that are shown by :func:`fit_names` (middle cut, end
    kept). ``right``: as in :func:`titled_table`; ``table_options``: rich ``Table`` options (``show_edge``...)."""
    t = Table(title=title, title_justify="left", **table_options)
    for i, col in enumerate(columns):
        justified = right == "all" or (right == "numbers" and i > 0) or (isinstance(right, tuple) and col in right)
        t.add_column(col, justify="right" if justified else "left")
    name_cols = (names,) if isinstance(names, int) else names
    shown = {i: [printable(str(r[i])) for r in rows] for i in name_cols}
    widths = _widths(console, t, columns, rows, shown)
    fitted = {i: fit_names(shown[i], widths[i] or max(map(len, shown[i]), default=0)) for i in name_cols}
    for column, w in zip(t.columns, widths, strict=True):
        column.width = w
    for i in name_cols:  # where no cut keeps the names apart they are shown whole, folded over lines
        t.columns[i].overflow = "fold"
    for n, row in enumerate(rows):
        cells = list(row)
        for i in name_cols:
            cells[i] = Text(fitted[i][shown[i][n]])
        t.add_row(*cells)
    return t


def _widths(console: Console, t: Table, columns: list[str], rows: list[list], shown: dict[int, list[str]]) -> list:
    """The column widths of :func:`names_table` (``None``: rich's own, when everything fits). The name columns
    (``shown``: their names by column) share what the console's width leaves once the table's rules and
    padding are paid and each other column has the narrowest width that breaks none of its words, the
    shortest names first served (each never under :data:`NAME_MIN_WIDTH`, nor over its longest name); what
    is left after that widens the other columns, the narrowest need first."""
    options = console.options
    need: list[tuple[int, int]] = []  # (minimum, maximum) per column
    for i, header in enumerate(columns):
        cells = [header, *(shown[i] if i in shown else (r[i] for r in rows))]
        sizes = [Measurement.get(console, options, c) for c in cells]
        need.append((max(m.minimum for m in sizes), max(m.maximum for m in sizes)))
    _top, pad_right, _bottom, pad_left = Padding.unpack(t.padding)
    padding = (pad_left + pad_right) * len(columns) - (0 if t.pad_edge else pad_left + pad_right)
    rules = (len(columns) - 1 + (2 if t.show_edge else 0)) if t.box else 0
    room = console.width - padding - rules
    if sum(hi for _, hi in need) <= room:
        return [None] * len(columns)
    widths = [lo for lo, _ in need]
    left = room - sum(lo for i, (lo, _) in enumerate(need) if i not in shown)
    by_length = sorted(shown, key=lambda i: need[i][1])
    for n, i in enumerate(by_length):  # an even share each, a short column's unused share to the longer ones
        share = left // (len(by_length) - n)
        widths[i] = min(need[i][1], max(share, NAME_MIN_WIDTH))
        left -= widths[i]
    spare = room - sum(widths)
    for i in sorted((i for i in range(len(columns)) if i not in shown), key=lambda i: need[i][1] - need[i][0]):
        grow = min(max(spare, 0), need[i][1] - widths[i])
        widths[i] += grow
        spare -= grow
    return widths
