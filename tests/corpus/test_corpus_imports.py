"""Where the corpus code sits: attnviz/corpus is Qt-free and imports only the layers below it (and the
leaf module attnviz.jsontext, the guarded JSON reader); Dask is
imported in two modules only, inside functions, so the window and the other commands run without it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "attnviz"
DASK_ROOTS = {"dask", "distributed"}
DASK_MODULES = {PKG / "corpus" / "run.py", PKG / "cli" / "corpus_cmd.py"}


def _imports(path: Path):
    """(module, at module level?) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            yield name, id(node) in top


def test_corpus_layer_imports_only_below_it():
    for path in sorted((PKG / "corpus").glob("*.py")):
        for name, _top in _imports(path):
            parts = name.split(".")
            assert parts[0] not in {"PySide6", "pyqtgraph", "numba"}, f"{path.name} imports {name}"
            if parts[0] == "attnviz" and len(parts) > 1:
                assert parts[1] in {"corpus", "checkpoints", "engine", "sources", "jsontext"}, f"{path.name} imports {name}"


def test_dask_only_in_the_corpus_driver_and_command_and_never_at_import():
    for path in sorted(PKG.rglob("*.py")):
        for name, top in _imports(path):
            if name.split(".")[0] in DASK_ROOTS:
                assert path in DASK_MODULES, f"{path.relative_to(ROOT)} imports {name}"
                assert not top, f"{path.relative_to(ROOT)} imports {name} at module level"


def test_window_and_cli_start_without_dask_or_pyarrow():
    code = ("import sys\n"
            "for m in ('dask', 'distributed', 'pyarrow'): sys.modules[m] = None\n"
            "import attnviz.ui.main_window, attnviz.ui.model_view.panel, attnviz.corpus\n"
            "from attnviz.cli import build_parser\n"
            "build_parser().parse_args(['corpus', 'm', 't', '--out', 'o'])\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_corpus_command_without_dask_says_what_to_install(tmp_path):
    text = tmp_path / "c.txt"
    text.write_text("the river\n")
    code = ("import sys\n"
            "for m in ('dask', 'distributed'): sys.modules[m] = None\n"
            "from attnviz.cli import main\n"
            f"raise SystemExit(main(['corpus', {str(ROOT / 'tests/data/checkpoints/tiny_gpt2')!r}, {str(text)!r}, "
            f"'--out', {str(tmp_path / 's.parquet')!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1
    assert r.stderr.strip() == "error: the corpus command runs on Dask: pip install 'attnviz[corpus]'"
