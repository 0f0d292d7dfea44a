# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``hex_to_text``: decode flodl's hex transport (e.g. FLODL_INTERNAL_FULL_CLUSTER_JSON) for humans."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import HexDecodeError, hex_decode


def hex_to_text(value):
    """UTF-8 text of a hex string, decoded like flodl (trimmed, either case)."""
    if not isinstance(value, str):
        raise AnsibleFilterError(f"hex_to_text expects a string, got {type(value).__name__}")
    try:
        return hex_decode(value).decode("utf-8")
    except (HexDecodeError, UnicodeDecodeError) as exc:
        raise AnsibleFilterError(f"hex_to_text: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"hex_to_text": hex_to_text}
