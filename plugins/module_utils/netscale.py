# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# MIT License (see LICENSE)
"""``FLODL_NET_TIMEOUT_SCALE`` validation, matching Rust ``f64::from_str`` (§1a)."""
from __future__ import annotations

import math
import re

ENV_NET_TIMEOUT_SCALE = "FLODL_NET_TIMEOUT_SCALE"
MIN_SCALE = 0.1

# Rust's f64 grammar: no underscores, no hex floats, inf/nan words allowed
# (rejected afterwards as non-finite). Python's float() also takes "1_0".
_RUST_FLOAT = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)",
    re.IGNORECASE,
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
    text = str(raw).strip()
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
