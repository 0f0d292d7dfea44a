"""FLODL_NET_TIMEOUT_SCALE (docs/launcher-contract.md §1a): Rust f64::from_str, finite, >= 0.1."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run.netscale import (
    ENV_NET_TIMEOUT_SCALE,
    MIN_SCALE,
    NetScaleError,
    parse_net_timeout_scale,
)


def test_constants():
    assert ENV_NET_TIMEOUT_SCALE == "FLODL_NET_TIMEOUT_SCALE"
    assert MIN_SCALE == 0.1


def test_unset_is_none():
    assert parse_net_timeout_scale(None) is None


@pytest.mark.parametrize(
    "raw,value",
    [
        ("3", 3.0),
        ("0.5", 0.5),
        (" 2.0 ", 2.0),
        ("\t2\n", 2.0),
        ("0.1", 0.1),
        ("1e3", 1000.0),
        ("1E3", 1000.0),
        ("1e+1", 10.0),
        ("5e-1", 0.5),
        ("+2", 2.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("007", 7.0),
        ("\u00a02\u3000", 2.0),  # Rust trim() strips Unicode White_Space
    ],
)
def test_accepted(raw, value):
    assert parse_net_timeout_scale(raw) == value


@pytest.mark.parametrize(
    "raw",
    [
        "0.05",
        "0.0999",
        "0",
        "-0",
        "-1",
        "1e-400",  # underflows to 0
    ],
)
def test_below_minimum_rejected(raw):
    with pytest.raises(NetScaleError, match="out of range"):
        parse_net_timeout_scale(raw)


@pytest.mark.parametrize("raw", ["inf", "-inf", "+inf", "infinity", "Infinity", "INF", "nan", "NaN", "-nan", "1e400"])
def test_non_finite_rejected(raw):
    # Rust parses these (so they are numbers), then refuses them as non-finite.
    with pytest.raises(NetScaleError, match="out of range"):
        parse_net_timeout_scale(raw)


@pytest.mark.parametrize(
    "raw",
    [
        "abc",
        "",
        "   ",
        "1_0",  # Python float() accepts it; Rust does not
        "0x10",
        "1,5",
        ".",
        "e3",
        "1e",
        "1e+",
        "++2",
        "2 3",
        "1.2.3",
        "inf inity",
        "infinit",
        "\u0663",  # ARABIC-INDIC DIGIT THREE: float() says 3.0, Rust refuses
        "\uff12",  # FULLWIDTH DIGIT TWO
        "\x1c2",  # Python strip() removes U+001C, Rust trim() does not
    ],
)
def test_not_a_number_rejected(raw):
    with pytest.raises(NetScaleError, match="is not a number"):
        parse_net_timeout_scale(raw)


def test_message_names_the_variable_and_value():
    with pytest.raises(NetScaleError) as exc:
        parse_net_timeout_scale("abc")
    assert "FLODL_NET_TIMEOUT_SCALE='abc'" in str(exc.value)
    assert "0.1" in str(exc.value)


def test_error_is_value_error():
    with pytest.raises(ValueError):
        parse_net_timeout_scale("-1")


def test_non_string_input_is_stringified():
    assert parse_net_timeout_scale(2) == 2.0
    assert parse_net_timeout_scale(0.5) == 0.5
