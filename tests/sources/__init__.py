"""Tests: sources (one file per kind, against real servers)."""
