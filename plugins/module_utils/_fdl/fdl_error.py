# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error of reading an fdl project: a problem ready to show to an operator.

Its message names the file(s), the key path, what was found and how to fix it.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence


class FdlConfigError(Exception):
    """A problem in the fdl configuration, ready to show to an operator.

    ``files`` are the files involved, ``key`` the dotted key path (may be
    empty), ``problem`` what was found and ``fix`` what to do about it.
    """

    def __init__(
        self, problem: str, files: Sequence[Any] = (), key: str = "", fix: str = "",
        problems: Optional[Sequence[str]] = None,
    ) -> None:
        self.files = [str(f) for f in files]
        self.key = key
        self.problem = problem
        self.fix = fix
        self.problems = list(problems) if problems else []
        super().__init__(self._render())

    def _render(self) -> str:
        if self.problems:
            head = " + ".join(self.files) + ": " if self.files else ""
            if len(self.problems) == 1:
                return head + self.problems[0]
            return head + "%d problems:\n  " % len(self.problems) + "\n  ".join(self.problems)
        parts = []
        if self.files:
            parts.append(" + ".join(self.files))
        if self.key:
            parts.append(self.key)
        head = ": ".join(parts)
        text = head + ": " + self.problem if head else self.problem
        if self.fix:
            text += " (fix: " + self.fix + ")"
        return text
