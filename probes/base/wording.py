"""How counts and numbers are written in the text a person reads (tables, warnings, figure titles)."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """"1 label", "3 labels" (`plural`: the plural where it is not `noun` + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def fixed(x: float, spec: str = ".3f") -> str:
    """`x` formatted by `spec`, never a negative zero: -0.0004 → "0.000" ("+0.000" with a sign in `spec`)."""
    text = format(x, spec)
    return format(0.0, spec) if x == x and float(text) == 0 else text
