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


def live_member_function(name: str) -> str:
    """POSIX sh defining ``name``: ``name -g <pgid>`` or ``name -s <sid>`` succeeds while a member of that
    process group or session is running. A zombie is no member: where nothing reaps orphans (a container
    without an init, some hosts' PID 1), an ended member stays one, and ``kill -0`` would wait out every grace.
    Without ``pgrep`` it falls back to ``kill -0`` on the group (``-g``), and finds no session member (``-s``: with
    no pgrep there is no pkill either, which preflight reports)."""
    return (
        f"{name}() {{ if ! command -v pgrep >/dev/null 2>&1; then "
        "if [ \"$1\" = -g ]; then kill -0 -\"$2\" 2>/dev/null; return; fi; return 1; fi; "
        "for __m in $(pgrep \"$1\" \"$2\" 2>/dev/null); do "
        "case $(sed 's/.*) //' \"/proc/$__m/stat\" 2>/dev/null | cut -c1) in ''|Z) ;; *) return 0;; esac; "
        "done; return 1; }"
    )
