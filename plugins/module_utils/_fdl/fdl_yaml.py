# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse YAML the way fdl-cli does (serde_yaml): YAML 1.2 core-schema scalars, duplicate keys refused.

Controller-side; PyYAML ships with ansible-core.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core always ships PyYAML
    yaml = None

# fdl-cli reads its files with serde_yaml, i.e. YAML 1.2 core-schema typing
# for plain scalars, not PyYAML's YAML 1.1 (where `yes`/`on` are booleans,
# `1e-7` a string and `1:30` the integer 90). The patterns follow
# serde_yaml's own scalar rules: a digit string with a redundant leading
# zero (`010`) stays a string, radix integers take 0x/0o/0b, and floats
# are Rust's `f64` syntax plus `.inf`/`.nan`.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|[-+]?0x[0-9a-fA-F]+|[-+]?0o[0-7]+|[-+]?0b[01]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?"
    r"|\+?\.(?:inf|Inf|INF)|-\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_U64_MAX = 2 ** 64 - 1
_I64_MIN = -(2 ** 63)
_TAG = "tag:yaml.org,2002:"


def core_int(text: str) -> Any:
    """A scalar :data:`_INT` matched, as serde_yaml reads it (``+`` only before an unsigned value)."""
    negative = text.startswith("-")
    body = text[1:] if text[:1] in "+-" else text
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if body.startswith(prefix):
            value = int(body[2:], base)
            value = -value if negative else value
            # A radix literal beyond 64 bits is not a number to serde_yaml.
            return value if _I64_MIN <= value <= _U64_MAX else text
    value = int(text)
    if _I64_MIN <= value <= _U64_MAX:
        return value
    return float(value)  # serde_yaml falls back to f64 for a decimal beyond 64 bits


def core_float(text: str) -> Any:
    """A scalar :data:`_FLOAT` matched; one that overflows to infinity stays text, as in serde_yaml."""
    lowered = text.lstrip("+").lower()
    if lowered in (".inf", "-.inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    value = float(text)
    return value if math.isfinite(value) else text


if yaml is not None:

    class FdlYamlLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        """PyYAML's safe loader with YAML 1.2 core-schema typing and duplicate keys refused."""

        # A fresh table: the inherited one carries the YAML 1.1 resolvers.
        yaml_implicit_resolvers: Dict[str, Any] = {}

        def construct_mapping(self, node: Any, deep: bool = False) -> Dict[Any, Any]:
            # serde_yaml refuses a repeated key; PyYAML would silently keep the last.
            seen = set()
            for key_node, _value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        "found duplicate key %r" % (key,), key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    def _scalar_with(constructor: Any, node: Any, convert: Any) -> Any:
        return convert(constructor.construct_scalar(node))

    FdlYamlLoader.add_implicit_resolver(_TAG + "null", _NULL, ["~", "n", "N", ""])
    FdlYamlLoader.add_implicit_resolver(_TAG + "bool", _BOOL, list("tTfF"))
    FdlYamlLoader.add_implicit_resolver(_TAG + "int", _INT, list("-+0123456789"))
    FdlYamlLoader.add_implicit_resolver(_TAG + "float", _FLOAT, list("-+.0123456789"))
    FdlYamlLoader.add_constructor(_TAG + "null", lambda c, n: _scalar_with(c, n, lambda t: None))
    FdlYamlLoader.add_constructor(_TAG + "bool", lambda c, n: _scalar_with(c, n, lambda t: t[0] in "tT"))
    FdlYamlLoader.add_constructor(_TAG + "int", lambda c, n: _scalar_with(c, n, core_int))
    FdlYamlLoader.add_constructor(_TAG + "float", lambda c, n: _scalar_with(c, n, core_float))


def parse_yaml(text: str) -> Any:
    """One YAML document read as fdl-cli reads it (see :class:`FdlYamlLoader`)."""
    return yaml.load(text, Loader=FdlYamlLoader)  # noqa: S506  (a SafeLoader subclass)
