"""CSV files as spreadsheets write them: the cell separator and the decimal mark.

A spreadsheet in a locale whose decimal mark is the comma (most of Europe, South America) saves
"CSV" with ``;`` between cells and ``3,5`` for 3.5, often with a UTF-8 byte-order mark and CRLF
line ends (the readers open files with ``utf-8-sig`` and ``newline=""`` for those). hwnas reads
such a file as the comma-separated one it stands for, wherever a user hands over a table of
measurements (``hwnas measure import``, ``--calibration``, a recorded device's ``file:``).
"""

from __future__ import annotations


def delimiter(header_line: str) -> str:
    """The cell separator of a CSV file from its header line: ``;`` or a tab where the header
    holds no comma and does hold that character, else ``,``. (Column names never hold a comma;
    arch strings may hold ``,`` and ``;``, OFA's do, but they are cells, quoted, never in the
    header.)"""
    if "," not in header_line:
        for d in (";", "\t"):
            if d in header_line:
                return d
    return ","


COMMA_HINT = (
    "a comma is a decimal mark only in a file with ';' between cells (is 1,234 a thousand or "
    "1.234?): write the number with a point and no thousands separator, or save the file with "
    "';' between cells"
)
"""Why a number with a comma in a ``,``- or tab-separated file is refused, for error lines."""


class AmbiguousComma(ValueError):
    """A number with a comma in a file whose cells are not ``;``-separated
    (:data:`COMMA_HINT`)."""


def number(cell: str, sep: str) -> float:
    """A cell of a file separated by ``sep`` as a float. In a ``;``-separated file (what a
    spreadsheet in a decimal-comma locale writes) a cell with one comma and no point is a
    decimal comma (``3,5`` is 3.5); in a ``,``- or tab-separated one a comma is no decimal mark
    (a quoted ``"1,234"`` may be a thousand written with a separator, or 1.234) and the cell
    is refused.

    Raises:
        AmbiguousComma: a cell with a comma in a file not separated by ``;``.
        ValueError: not a number.
    """
    text = cell.strip()
    if "," in text and sep != ";":
        raise AmbiguousComma(COMMA_HINT)
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")
    return float(text)
