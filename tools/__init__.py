"""The repository's tools, run from the repository root as modules: python3 -m tools.NAME."""
