"""Fixtures for namespace ssh hosts (filled by the harness)."""
