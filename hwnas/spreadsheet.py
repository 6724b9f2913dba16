"""CSV files as spreadsheets write them: the cell separator and the decimal mark.

A spreadsheet in a locale whose decimal mark is the comma (most of Europe, South America) saves
"CSV" with ``;`` between cells and ``3,5`` for 3.5, often with a UTF-8 byte-order mark and CRLF
line ends (the readers open files with ``utf-8-sig`` and ``newline=""`` for those). hwnas reads
such a file as the comma-separated one it stands for, wherever a user hands over a table of
measurements (``hwnas measure import``, ``--calibration``, a recorded device's ``file:``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


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


THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(?:\.\d{3})+(?:,\d*)?")
"""A number whose points are shaped like thousands grouping: ``1.173``, ``12.345.678``,
``1.234,5`` (a decimal-comma spreadsheet's 1,173, 12,345,678 and 1,234.5 "as shown")."""

POINT_HINT = (
    "a point in a file with ';' between cells may be a thousands separator (a thousand and "
    "more, or a decimal?): save the numbers without thousands separators (format the cells "
    "as numbers without the 1000 separator), or write them with decimal points and ',' "
    "between cells"
)
"""Why a number shaped like thousands grouping in a ``;``-separated file is refused
(:func:`decimal_point`), for error lines."""


class AmbiguousPoint(ValueError):
    """A number whose point may be a thousands separator in a ``;``-separated file
    (:data:`POINT_HINT`)."""


def decimal_point(cells: Iterable[str], sep: str) -> bool:
    """Whether a point in the cells of one column of a file separated by ``sep`` is a decimal
    mark. Outside ``;``-separated files it always is. A ``;``-separated file is a
    decimal-comma spreadsheet's (``3,5``, and ``1.173`` for 1,173 where the cells show
    thousands separators) or a program's with decimal points (``3.5``): the point is a decimal
    mark there only where no cell of the column holds a comma and some cell holds a point not
    shaped like thousands grouping (``6.3278``, ``0.632``, ``1.5``; :data:`THOUSANDS`). A
    column of whole numbers and cells such as ``1.173``, or of decimal commas and ``1.234``,
    leaves the point ambiguous: :func:`number` refuses its cells shaped like thousands
    grouping."""
    if sep != ";":
        return True
    evidence = False
    for cell in cells:
        text = cell.strip()
        if "," in text:
            return False
        if "." in text and not THOUSANDS.fullmatch(text):
            try:
                float(text)
            except ValueError:
                continue  # text ('n.a.'): says nothing of the numbers
            evidence = True
    return evidence


def number(cell: str, sep: str, point: bool = True) -> float:
    """A cell of a file separated by ``sep`` as a float. In a ``;``-separated file (what a
    spreadsheet in a decimal-comma locale writes) a cell with one comma and no point is a
    decimal comma (``3,5`` is 3.5); in a ``,``- or tab-separated one a comma is no decimal mark
    (a quoted ``"1,234"`` may be a thousand written with a separator, or 1.234) and the cell
    is refused. ``point`` says whether a point is a decimal mark in the cell's column
    (:func:`decimal_point`); where it is not, a ``;``-separated file's cell shaped like
    thousands grouping (``1.173``) is refused, and so is one with both (``1.234,5``) anywhere.

    Raises:
        AmbiguousComma: a cell with a comma in a file not separated by ``;``.
        AmbiguousPoint: in a ``;``-separated file, a cell shaped like thousands grouping where
            the point is not a decimal mark, or one with a comma after thousands points.
        ValueError: not a number (an underscore too: ``1_5`` is no number in a spreadsheet).
    """
    text = cell.strip()
    if "_" in text:  # float() reads Python's digit grouping: '1_5' was imported as 15.0
        raise ValueError(f"could not convert string to float: {text!r}")
    if "," in text and sep != ";":
        raise AmbiguousComma(COMMA_HINT)
    if sep == ";" and THOUSANDS.fullmatch(text) and ("," in text or not point):
        raise AmbiguousPoint(POINT_HINT)
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")
    return float(text)
