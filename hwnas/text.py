"""Text made safe to print: the control characters of a value read from a file someone
handed over shown escaped (:func:`visible`), line breaks too where it must stay one line
(:func:`one_line`). Pure functions with no dependency, used by the CLI's output
(:mod:`hwnas.cli.render` re-exports them) and by the layers under it (device profiles'
errors)."""

from __future__ import annotations

__all__ = ["one_line", "visible"]

_CONTROLS = {
    c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)
} | {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
"""Control characters, and the bidirectional overrides and isolates (a file name holding
U+202E would show a line's text reversed from there on)."""


def visible(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``: an ESC
    (0x1b) or a C1 CSI (0x9b) in a value read from a file someone handed over (a zoo card's
    accuracy, a study's attribute, a table's column name) would otherwise clear the screen,
    retitle the window or write the clipboard (OSC 52) when printed to a terminal."""
    return text.translate(_CONTROLS)


_LINE_BREAKS = {
    **_CONTROLS,
    0x09: "\\x09",
    0x0A: "\\x0a",
    0x0D: "\\x0d",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def one_line(text: object) -> str:
    """``str(text)`` with every control character shown as ``\\xNN``, tab, newline and
    carriage return included (and the Unicode line and paragraph separators as ``\\u2028``,
    ``\\u2029``): for a name, op type or path interpolated into a line that must stay one line
    (a warning, a per-model result). :func:`visible` keeps newlines for text that is multi-line
    on purpose (tables, help); a model file named ``"a\\nb.onnx: 1 ms"`` or an ONNX op type
    holding a newline would otherwise print a forged line of its own."""
    return str(text).translate(_LINE_BREAKS)
