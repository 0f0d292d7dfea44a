"""Hex transport (docs/launcher-contract.md §1)."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import HexDecodeError, hex_decode, hex_encode


def test_encode_is_lowercase_two_chars_per_byte():
    assert hex_encode(b"\x00\x0f\xab\xff") == "000fabff"


def test_encode_str_uses_utf8_bytes():
    assert hex_encode("{") == "7b"
    assert hex_encode("é") == "c3a9"
    assert hex_encode("") == ""


def test_encode_accepts_bytearray():
    assert hex_encode(bytearray(b"AZ")) == "415a"


def test_decode_round_trip():
    text = '{"host": "gpu-ü"}'
    assert hex_decode(hex_encode(text)).decode("utf-8") == text


def test_decode_accepts_either_case_and_trims():
    assert hex_decode("  7B0A\n") == b"{\n"
    assert hex_decode("aBcD") == b"\xab\xcd"
    assert hex_decode("") == b""


@pytest.mark.parametrize("bad", ["7", "abc", " 7b0 "])
def test_decode_refuses_odd_length(bad):
    with pytest.raises(HexDecodeError, match="odd length"):
        hex_decode(bad)


@pytest.mark.parametrize("bad", ["zz", "7g", "7b 0a", "0x7b", "éé"])
def test_decode_refuses_non_hex(bad):
    with pytest.raises(HexDecodeError):
        hex_decode(bad)


def test_decode_error_is_a_value_error():
    with pytest.raises(ValueError):
        hex_decode("q1")
