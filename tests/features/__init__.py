"""Tests: features."""
