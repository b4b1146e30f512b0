"""Tests: vectorstore."""
