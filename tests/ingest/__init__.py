"""Tests: ingest."""
