"""``graphprobe demo``: the whole loop on an embedded model, in one command."""

from graphprobe.demo.run import DemoOptions, DemoResult, run_demo

__all__ = ["DemoOptions", "DemoResult", "run_demo"]
