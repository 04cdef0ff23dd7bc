"""Benchmarks and their data generators (not tests)."""
