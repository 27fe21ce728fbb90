"""The benchmarks, run from the repository root as modules: python3 -m bench.NAME."""
