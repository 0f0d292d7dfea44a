# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serde_json's exact text for plain JSON data: its pretty and compact formatters and its f64 layout.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def serde_float(value: float) -> str:
    """A finite f64 as serde_json (ryu) prints it: shortest digits, Rust's layout.

    Positional when the decimal exponent of the first digit is in -5..15
    (``0.00001``, ``1000000000000000.0``), else scientific with a bare
    exponent (``1e-6``, ``1.5e-7``, ``1e16``); integral values keep ``.0``.
    Python's ``repr`` already yields the shortest round-trip digits, so only
    the layout is redone here. Non-finite values are ``null`` in serde_json.
    """
    if not math.isfinite(value):
        return "null"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits_t, exp = _shortest_digits(abs(value))
    digits = "".join(digits_t)
    length = len(digits)
    point = length + exp  # position of the decimal point relative to the digits
    if 0 <= exp and point <= 16:
        return sign + digits + "0" * exp + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * -point + digits
    mantissa = digits if length == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{point - 1}"


def _shortest_digits(value: float) -> tuple[list[str], int]:
    """(significant digits without trailing zeros, exponent of the last digit) of ``repr(value)``."""
    text = repr(value)
    mantissa, _sep, exp_text = text.partition("e")
    exp = int(exp_text) if exp_text else 0
    whole, _dot, frac = mantissa.partition(".")
    digits = list((whole + frac).lstrip("0"))
    exp -= len(frac)
    while len(digits) > 1 and digits[-1] == "0":
        digits.pop()
        exp += 1
    return digits, exp


def _serde(value: Any, indent: str | None, out: list[str]) -> None:
    # serde_json's formatters: PrettyFormatter (two spaces, one item per line) when ``indent`` is a string,
    # CompactFormatter (no whitespace at all) when it is None; [] / {} when empty, keys in the value's order.
    if isinstance(value, (Mapping, list, tuple)):
        mapping = isinstance(value, Mapping)
        items = list(value.items()) if mapping else list(value)
        if not items:
            out.append("{}" if mapping else "[]")
            return
        inner = None if indent is None else indent + "  "
        out.append(("{" if mapping else "[") + ("" if inner is None else "\n"))
        for index, item in enumerate(items):
            if index:
                out.append("," if inner is None else ",\n")
            if inner is not None:
                out.append(inner)
            if mapping:
                key, item = item
                out.append(json.dumps(str(key), ensure_ascii=False) + (":" if inner is None else ": "))
            _serde(item, inner, out)
        out.append(("" if indent is None else "\n" + indent) + ("}" if mapping else "]"))
    elif isinstance(value, float):
        out.append(serde_float(value))
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def _same_in_python(value: Any) -> bool:
    """Whether Python's json module writes ``value`` as serde_json does: no float (ryu's layout differs), only
    dicts with str keys, lists and tuples around str, int, bool and None. Escapes are the same with
    ``ensure_ascii=False``, and so is the pretty layout (two spaces, ``[]``/``{}`` when empty)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, float) or not (item is None or isinstance(item, (str, int))):
            return False
    return True


def serde_pretty(value: Any) -> str:
    """``serde_json::to_string_pretty`` bytes for plain JSON data (strings escape as serde does)."""
    if _same_in_python(value):  # the common case, a topology without floats: json's C encoder
        return json.dumps(value, indent=2, ensure_ascii=False)
    out: list[str] = []
    _serde(value, "", out)
    return "".join(out)


def serde_compact(value: Any) -> str:
    """``serde_json::to_string`` bytes for plain JSON data (same key order and floats as the pretty form)."""
    if _same_in_python(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    out: list[str] = []
    _serde(value, None, out)
    return "".join(out)
