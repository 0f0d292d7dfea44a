# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Training output shown in batches: bounded latency, a bounded number of display calls.

Every display call of an action becomes one job event under ansible-runner (AWX): a training that
prints 6,000 lines would make 6,000 events. Lines are gathered instead and shown together when the
oldest one has waited ``interval`` seconds, or when a batch reaches ``max_lines`` lines or
``max_bytes`` bytes. The log file still gets every line as it comes. Pure logic; the clock is passed in.
"""
from __future__ import annotations

DEFAULT_INTERVAL = 2.0
DEFAULT_MAX_LINES = 500
DEFAULT_MAX_BYTES = 64 * 1024


class OutputBatcher:
    """Collects lines; hands back each batch as one text (lines joined with newlines)."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, max_lines: int = DEFAULT_MAX_LINES,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.interval = max(0.0, float(interval))
        self.max_lines = max(1, int(max_lines))
        self.max_bytes = max(1, int(max_bytes))
        self._lines: list[str] = []
        self._size = 0
        self._since: float | None = None
        self.batches = 0

    def add(self, line: str, now: float) -> str | None:
        """Buffer ``line``; the batch to show now when it is full or overdue, else None."""
        if self._since is None:
            self._since = now
        self._lines.append(line)
        self._size += len(line) + 1
        if len(self._lines) >= self.max_lines or self._size >= self.max_bytes or self.due(now):
            return self.take()
        return None

    def due(self, now: float) -> bool:
        return self._since is not None and now - self._since >= self.interval

    def wait(self, now: float) -> float | None:
        """Seconds until the buffered batch is due (0 when overdue); None when nothing is buffered."""
        if self._since is None:
            return None
        return max(0.0, self.interval - (now - self._since))

    def take(self) -> str | None:
        """The buffered lines as one text (None when empty), and an empty buffer."""
        if not self._lines:
            return None
        text = "\n".join(self._lines)
        self._lines, self._size, self._since = [], 0, None
        self.batches += 1
        return text
