"""Vaulted values withheld in every shape the collection renders them, and the model's placeholders."""
from __future__ import annotations

import json

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import (
    MARK,
    forms,
    holds,
    mask,
    redact,
    redact_bytes,
    redact_text,
    unmask,
)

SECRET = "s3cret-\"quoted\"-é"


def test_every_shape_of_a_secret_is_withheld():
    hexed = json.dumps({"TOKEN": SECRET}, ensure_ascii=False).encode().hex()
    text = f"plain {SECRET}; json {json.dumps(SECRET)}; raw json {json.dumps(SECRET, ensure_ascii=False)}; hex {hexed}"
    out = redact_text(text, [SECRET])
    assert SECRET not in out and json.dumps(SECRET)[1:-1] not in out
    assert json.dumps(SECRET, ensure_ascii=False)[1:-1].encode().hex() not in out
    assert out.startswith(f"plain {MARK}; json \"{MARK}\"")
    assert hexed not in out and hexed[:20] in out  # the rest of the hex is still there, the secret's part is not


def test_the_longest_shape_wins_and_other_text_stays():
    assert redact_text("ab abc abcd", ["abc", "abcd"]) == f"ab {MARK} {MARK}"
    assert redact_text("nothing here", ["abcd"]) == "nothing here"
    assert redact_text("anything", []) == "anything"
    assert redact_text("anything", [""]) == "anything"  # an empty vaulted value withholds nothing


def test_a_short_secret_has_no_hex_shape():
    # "42" as hex is "3432": a digest or a ciphertext would lose unrelated characters.
    assert forms("42") == ["42"]
    assert redact_text("digest 3432aa, value 42", ["42"]) == f"digest 3432aa, value {MARK}"
    assert "74776f2d" in forms("two-")


def test_results_are_redacted_deeply_keys_included_and_kept_fields_whole():
    result = {"msg": f"x {SECRET}", "env": {"A": SECRET}, "list": [SECRET, 3, None], SECRET: 1}
    out = redact(result, [SECRET], keep=("env",))
    assert out == {"msg": f"x {MARK}", "env": {"A": SECRET}, "list": [MARK, 3, None], MARK: 1}
    assert holds(result, [SECRET]) and not holds(out["list"], [SECRET]) and not holds(result, [])
    assert redact(result, []) is result


def test_log_lines_as_bytes_keep_undecodable_bytes():
    line = b"\xff rank says " + SECRET.encode() + b"\n"
    assert redact_bytes(line, [SECRET]) == b"\xff rank says " + MARK.encode() + b"\n"
    assert redact_bytes(line, []) is line


def test_mask_and_unmask_round_trip_by_index():
    secrets = ["alpha-secret", "alpha"]
    value = {"env": {"A": "alpha-secret", "B": "pre alpha post"}, "k-alpha": ["alpha"], "n": 1}
    masked = mask(value, secrets)
    assert masked == {"env": {"A": "<vaulted:0>", "B": "pre <vaulted:1> post"}, "k-<vaulted:1>": ["<vaulted:1>"],
                      "n": 1}
    assert unmask(masked, secrets) == value
    assert mask(value, []) is value
    with pytest.raises(ValueError):
        unmask(masked, ["only-one"])


def test_an_empty_secret_masks_nothing():
    value = {"env": {"A": "text"}}
    assert mask(value, [""]) is value
    assert mask(value, ["", "text"]) == {"env": {"A": "<vaulted:1>"}}
