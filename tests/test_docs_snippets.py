"""Every ```python block of README.md, CHANGELOG.md, examples/README.md and
docs/*.md runs as written.

Each block runs in its own interpreter, in an empty folder: nothing is
created there first (no ``config.json``, no ``./dump``), so a block that reads
a file must write it and a block that writes into a folder must work when
the folder is missing, as in a reader's fresh folder. Only what the reader
brings is defined (see ``PRELUDE``): a small ``model`` and tensors ``x``,
``h``, ``logits`` and ``tokens``. A block that uses ``graphprobe`` or
``torch`` must import it, as a reader's script would.

A block that is a fragment on purpose (pseudo-code, a shape of a call) opts
out with the line ``<!-- docs-test: skip -->`` right above its opening fence;
keep that rare. A block that needs another name: add it to ``PRELUDE``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_MARKER = "<!-- docs-test: skip -->"
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)

# What a reader is assumed to have. Bound under private names, then exposed
# one by one, so that `torch` itself is not given away.
PRELUDE = """
import torch as _torch
_torch.manual_seed(0)
model = _torch.nn.Sequential(_torch.nn.Linear(8, 16), _torch.nn.ReLU(), _torch.nn.Linear(16, 4)).eval()
x = _torch.randn(2, 8)
h = _torch.randn(2, 16)
logits = _torch.randn(2, 4)
tokens = _torch.randint(0, 64, (2, 5))
del _torch
"""


DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "examples" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]


def _blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if before.strip() == SKIP_MARKER:
                continue
            line = text[: m.start()].count("\n") + 1
            out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return out


BLOCKS = _blocks()


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 3, BLOCKS  # the extraction itself works
    # the new user's pages are read too (issue 31 item 9)
    assert any(w.startswith("docs/troubleshooting.md:") for w, _ in BLOCKS)
    assert all(doc.is_file() for doc in DOCS)


@pytest.mark.parametrize("where,code", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_docs_block_runs(where: str, code: str, tmp_path: Path) -> None:
    assert not any(tmp_path.iterdir())  # an empty folder, as a reader's
    script = PRELUDE + "\n" + code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{where}: the block fails as written:\n{code}\n{proc.stderr[-3000:]}"
