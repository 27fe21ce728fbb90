"""The harness's machinery behind eval.py: spec files, the worker process, the case runners, floors."""
