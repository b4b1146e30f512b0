"""Tests: service."""
