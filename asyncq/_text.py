"""Text made safe to show: what a task carries (type, id, error) reaches terminals and logs."""

from __future__ import annotations

import unicodedata

_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, bidi/format, surrogates, breaks


def printable(text: object) -> str:
    r"""``text`` with every control, format (bidi), surrogate and line-break character written
    as an escape (``\x1b``, ``\n``, ``\u202e``): a task type, id, queue or error message can
    neither drive the terminal nor forge output lines. ``--json`` output stays exact."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c == " " or unicodedata.category(c) not in _UNSAFE
                   else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in s)


def scaled_bytes(n: int, units: tuple[str, str, str, str], sep: str = "") -> str:
    """``n`` bytes in the largest of ``units`` (B, K, M, G by 1024) that keeps it under 1024:
    ``2.5<sep>KiB``; whole bytes without a decimal."""
    value, step = float(n), 0
    while value >= 1024 and step < len(units) - 1:
        value /= 1024
        step += 1
    return f"{value:.0f}{sep}{units[0]}" if step == 0 else f"{value:.1f}{sep}{units[step]}"
