"""Runnable examples, run from the repository root as modules: python3 -m examples.NAME."""
