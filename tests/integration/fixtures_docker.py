"""Fixtures for the docker engine (filled by the harness)."""
