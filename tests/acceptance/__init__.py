"""Tests: acceptance."""
