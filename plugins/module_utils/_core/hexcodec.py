# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hex transport of JSON documents between fdl-cli and flodl's launcher (docs/launcher-contract.md §1)."""
from __future__ import annotations

import binascii


class HexDecodeError(ValueError):
    """The text is not an even-length run of hex digits."""


def hex_encode(data: str | bytes) -> str:
    """Lowercase hex of the UTF-8 bytes, two characters per byte, no separators."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return binascii.hexlify(raw).decode("ascii")


def hex_decode(text: str) -> bytes:
    """Decode like the launcher: trim, accept either case, refuse odd length or non-hex."""
    cleaned = text.strip()
    if len(cleaned) % 2:
        raise HexDecodeError(f"hex text has odd length {len(cleaned)}")
    try:
        return binascii.unhexlify(cleaned)
    except (binascii.Error, ValueError) as exc:
        raise HexDecodeError(f"hex text has a non-hex character: {exc}") from exc
