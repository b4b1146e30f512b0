"""Tests: pagemodels."""
