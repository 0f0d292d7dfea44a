"""The hex_to_text filter: flodl's hex transport decoded for humans, bad input refused by name."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.flodl.cluster.plugins.filter.hex_to_text import FilterModule, hex_to_text
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_encode


def test_the_filter_decodes_what_the_codec_encodes_either_case_and_trimmed():
    text = '{"controller":{"host":"gpu-a"},"é":1}'
    assert hex_to_text(hex_encode(text)) == text
    assert hex_to_text(f"  {hex_encode(text).upper()}\n") == text
    assert FilterModule().filters()["hex_to_text"] is hex_to_text


@pytest.mark.parametrize("value, words", [
    (42, "hex_to_text expects a string, got int"),
    ("abc", "hex_to_text: "),
    ("ff", "hex_to_text: "),  # not UTF-8
])
def test_bad_input_is_refused_by_the_filter(value, words):
    with pytest.raises(AnsibleFilterError) as raised:
        hex_to_text(value)
    assert str(raised.value).startswith(words)
