#!/usr/bin/env bash
# Build the attnviz desktop bundle (dist/attnviz/attnviz) with PyInstaller, report its size and build
# time, then run the frozen app's smoke test. `make package` runs this after `make setup`.
#
#   packaging/build.sh             build, then smoke-test the bundle
#   packaging/build.sh --no-test   build only
#
# Environment: ATTNVIZ_PACKAGE_KEEP_ALL=1 builds without the Qt/package exclusions (see the spec).
set -euo pipefail

PYINSTALLER_VERSION="6.22.3"  # pinned: hooks and bundle layout change between PyInstaller releases

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
RUN_TESTS=1
for arg in "$@"; do
  case "$arg" in
    --no-test) RUN_TESTS=0 ;;
    *) echo "packaging/build.sh: unknown option $arg (known: --no-test)" >&2; exit 2 ;;
  esac
done

if [ ! -x "$PY" ]; then
  echo "packaging/build.sh: $PY not found; run 'make setup' first" >&2
  exit 1
fi

installed="$("$PY" -c 'import importlib.metadata as m; print(m.version("pyinstaller"))' 2>/dev/null || true)"
if [ "$installed" != "$PYINSTALLER_VERSION" ]; then
  echo "installing PyInstaller $PYINSTALLER_VERSION into .venv (found: ${installed:-none})"
  "$PY" -m pip install --quiet "pyinstaller==$PYINSTALLER_VERSION"
fi

# The PNG icons are committed; render them only if a checkout lost them.
for size in 16 32 48 64 128 256; do
  if [ ! -f "packaging/linux/icons/hicolor/${size}x${size}/apps/io.github.attnviz.attnviz.png" ]; then
    QT_QPA_PLATFORM=offscreen "$PY" packaging/make_icons.py
    break
  fi
done

start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" packaging/attnviz.spec
end=$(date +%s)

size="$(du -sh dist/attnviz | cut -f1)"
echo "bundle: dist/attnviz/attnviz  size: $size  build time: $((end - start)) s"

if [ "$RUN_TESTS" = 1 ]; then
  # the bundle is the one just built, even if a source file changed during the build
  ATTNVIZ_PACKAGE_JUST_BUILT=1 QT_QPA_PLATFORM=offscreen "$PY" -m pytest -q -m package tests/packaging
fi
