# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``FLODL_NET_TIMEOUT_SCALE`` validation, matching Rust ``f64::from_str`` (docs/launcher-contract.md §1a)."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import ENV_NET_TIMEOUT_SCALE

import math
import re

MIN_SCALE = 0.1

# Rust's f64 grammar: no underscores, no hex floats, inf/nan words allowed
# (rejected afterwards as non-finite). Python's float() also takes "1_0".
# ASCII digits only: Python's ``\d`` and ``float()`` also take other scripts'
# digits (``"\u0663"`` parses as 3.0), which Rust refuses.
_RUST_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)
# Rust's str::trim strips Unicode White_Space; Python's str.strip() also
# strips the ASCII separators U+001C..U+001F, which Rust keeps (and then
# fails to parse).
_RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class NetScaleError(ValueError):
    """The scale is set but unusable."""


def parse_net_timeout_scale(raw: str | None) -> float | None:
    """Return the scale, ``None`` when unset, or raise :class:`NetScaleError`.

    A value below 0.1 would shrink every cluster deadline to the point
    where healthy hosts time out, so it is refused like flodl does.
    """
    if raw is None:
        return None
    text = str(raw).strip(_RUST_WHITESPACE)
    if not _RUST_FLOAT.fullmatch(text):
        raise NetScaleError(
            f"{ENV_NET_TIMEOUT_SCALE}={str(raw)!r} is not a number; "
            f"set a finite value >= {MIN_SCALE} (e.g. 2 to double every network deadline) or unset it"
        )
    value = float(text)
    if not math.isfinite(value) or value < MIN_SCALE:
        raise NetScaleError(
            f"{ENV_NET_TIMEOUT_SCALE}={str(raw)!r} is out of range; it must be finite and >= {MIN_SCALE} "
            "(smaller values make healthy hosts miss their deadlines)"
        )
    return value
