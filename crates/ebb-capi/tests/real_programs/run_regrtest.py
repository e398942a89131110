"""Runs CPython's regression suite (`python -m test`) for real_programs.rs.

Usage: python run_regrtest.py [regrtest options] -- test_name...

The test names not present in this interpreter's suite are dropped (and listed), so the
same list works across CPython versions. EBB_SHOW_STATS is removed from the environment
before the suite starts: ebb read it when this process first allocated, so this process
still prints its report at exit, but the suite's worker processes and the interpreters
its tests start must keep stderr clean (many tests compare it with b"").
"""
import importlib.util
import os
import runpy
import sys

os.environ.pop("EBB_SHOW_STATS", None)
args = sys.argv[1:]
sep = args.index("--")
options, names = args[:sep], args[sep + 1:]
present = [n for n in names if importlib.util.find_spec("test." + n) is not None]
missing = [n for n in names if n not in present]
if missing:
    print("not in this Python's test suite, skipped:", " ".join(missing), flush=True)
sys.argv = ["python -m test"] + options + present
runpy.run_module("test", run_name="__main__", alter_sys=True)
