# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shell quoting exactly as flodl's two sides do it (docs/launcher-contract.md §6)."""
from __future__ import annotations

import string

# fdl-cli leaves a token bare only when it is made of these characters.
_BARE_SAFE = frozenset(string.ascii_letters + string.digits + "_-./:=+@,")


def posix_quote(token: str) -> str:
    """Quote like fdl-cli: bare when safe, ``''`` when empty, else single quotes."""
    if token and all(ch in _BARE_SAFE for ch in token):
        return token
    return always_quote(token)


def always_quote(token: str) -> str:
    """Quote like flodl's launcher: always single quotes, ``'`` as ``'\\''``."""
    return "'" + token.replace("'", "'\\''") + "'"


def join_posix(tokens: list[str]) -> str:
    """A command line whose every token is quoted with :func:`posix_quote`."""
    return " ".join(posix_quote(t) for t in tokens)
