# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values that came from Ansible Vault, withheld from everything the collection shows or keeps.

A secret reaches the launcher in several shapes: as itself, JSON-escaped inside the topology, and as hex
inside ``FLODL_INTERNAL_FULL_CLUSTER_JSON``. :func:`redact` replaces every shape, in any string of a result,
a log line or a displayed text. The run model travels between tasks with each secret replaced by a numbered
placeholder (:func:`mask`), filled back on the way in (:func:`unmask`) by the step that can decrypt it.
"""
from __future__ import annotations

import binascii
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

MARK = "<vaulted value withheld>"
# A shorter secret's hex would match hex it is not part of (digests, ciphertexts) too often to be told apart.
HEX_MIN_CHARS = 4
_PLACEHOLDER = "<vaulted:{}>"
_PLACEHOLDER_RE = re.compile(r"<vaulted:(\d+)>")


def forms(secret: str) -> list[str]:
    """Every shape a secret takes in what the collection renders: itself, JSON-escaped, hex (either case)."""
    shapes = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}
    for text in list(shapes) if len(secret) >= HEX_MIN_CHARS else ():
        hexed = binascii.hexlify(text.encode("utf-8", "surrogateescape")).decode("ascii")
        shapes.update((hexed, hexed.upper()))
    return sorted((s for s in shapes if s), key=lambda s: (-len(s), s))


@lru_cache(maxsize=8)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    shapes = sorted({f for s in secrets for f in forms(s)}, key=lambda s: (-len(s), s))
    return re.compile("|".join(re.escape(s) for s in shapes)) if shapes else None


def _key(secrets: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({s for s in secrets if s}))


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every shape of every secret replaced by :data:`MARK` (longest first)."""
    pattern = _pattern(_key(secrets))
    return text if pattern is None else pattern.sub(MARK, text)


def redact_bytes(data: bytes, secrets: Sequence[str]) -> bytes:
    """A log line as bytes, redacted; undecodable bytes pass through as they came."""
    if not _key(secrets):
        return data
    text = data.decode("utf-8", "surrogateescape")
    return redact_text(text, secrets).encode("utf-8", "surrogateescape")


def redact(value: Any, secrets: Sequence[str], keep: Sequence[str] = ()) -> Any:
    """A copy of a JSON-like value with every string redacted; top-level keys in ``keep`` left as they are."""
    if not _key(secrets):
        return value
    if isinstance(value, dict):
        return {redact_text(k, secrets) if isinstance(k, str) else k: v if k in keep else redact(v, secrets)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value


def holds(value: Any, secrets: Sequence[str]) -> bool:
    """True when any string in ``value`` (keys included) holds a shape of a secret."""
    return redact(value, secrets) != value


def mask(value: Any, secrets: Sequence[str]) -> Any:
    """A copy with each secret (as itself) replaced by ``<vaulted:i>``, ``i`` its index in ``secrets``."""
    if not secrets:
        return value
    order = sorted(range(len(secrets)), key=lambda i: -len(secrets[i]))
    pattern = re.compile("|".join(re.escape(secrets[i]) for i in order if secrets[i]))
    index = {secrets[i]: i for i in order}
    if not pattern.pattern:
        return value
    return _each_string(value, lambda text: pattern.sub(lambda m: _PLACEHOLDER.format(index[m.group(0)]), text))


def _each_string(value: Any, change: Any) -> Any:
    """A copy of plain JSON data with ``change`` applied to every string, keys included."""
    if isinstance(value, dict):
        return {_each_string(k, change): _each_string(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_string(v, change) for v in value]
    return change(value) if isinstance(value, str) else value


def unmask(value: Any, secrets: Sequence[str]) -> Any:
    """The inverse of :func:`mask`; raises ValueError for a placeholder with no secret of that index."""
    def fill(match: re.Match[str]) -> str:
        index = int(match.group(1))
        if index >= len(secrets):
            raise ValueError(f"placeholder {match.group(0)} has no secret")
        return secrets[index]

    return _each_string(value, lambda text: _PLACEHOLDER_RE.sub(fill, text))
