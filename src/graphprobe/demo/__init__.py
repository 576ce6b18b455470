"""``graphprobe demo``: the whole loop on an embedded model, in one command.

``graphprobe.demo.run.run_demo`` runs it from Python; ``command`` holds the
CLI registrar (imported to build ``graphprobe --help``, so nothing here
imports torch at import time).
"""
