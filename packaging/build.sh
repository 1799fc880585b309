#!/usr/bin/env bash
# Build the attnviz desktop bundle (dist/attnviz/attnviz) with PyInstaller, report its size, file count
# and build time, then run the tests of the frozen app. `make package` runs this after `make setup`.
#
#   packaging/build.sh             build, then run the tests of the frozen app
#   packaging/build.sh --no-test   build only
#
# Environment: ATTNVIZ_PACKAGE_KEEP_ALL=1 builds without any trimming (exclusions, stripping; see the spec).
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

for tool in readelf strip; do  # the spec reads and strips shared libraries with binutils
  if ! command -v "$tool" >/dev/null; then
    echo "packaging/build.sh: $tool not found; install binutils ('make package' does)" >&2
    exit 1
  fi
done

# PyInstaller's warnings go to build/pyinstaller/build.log too: tests/packaging checks that each has
# its answer in packaging/bundle_contents.py (ANSWERED_WARNINGS).
mkdir -p build/pyinstaller
start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" packaging/attnviz.spec \
  2> >(tee build/pyinstaller/build.log >&2)
end=$(date +%s)
wait  # for tee

size="$(du -sh dist/attnviz | cut -f1)"
files="$(find dist/attnviz -type f | wc -l)"
echo "bundle: dist/attnviz/attnviz  size: $size  files: $files  build time: $((end - start)) s"

if [ "$RUN_TESTS" = 1 ]; then
  # The tests of the bundle just built, named by file (never an empty selection). They always run,
  # even if a source file changed during the build, and fail rather than skip without a bundle.
  ATTNVIZ_PACKAGE_JUST_BUILT=1 QT_QPA_PLATFORM=offscreen "$PY" -m pytest -q -p no:cacheprovider \
    tests/packaging/test_frozen_app.py tests/packaging/test_bundle_self_test.py tests/packaging/test_bundle_files.py
fi
