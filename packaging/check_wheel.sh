#!/usr/bin/env bash
# Build attnviz's sdist and wheel in a temporary folder, check them with twine, install the wheel into a
# fresh virtual environment and run it from outside the checkout, so that nothing of the checkout can be
# what is found. `.ci/run` runs this after `make package`.
#
#   packaging/check_wheel.sh          build, check, install, run
#   packaging/check_wheel.sh --keep   the same, and keep the temporary folder (its path is printed)
#
# build and twine are installed into a throw-away environment of their own (never into .venv). Only the
# files git tracks are built (their working-tree contents): files others have not added yet stay out.
# Environment: PYTHON (default python3) makes the environments.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
KEEP=0
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    *) echo "packaging/check_wheel.sh: unknown option $arg (known: --keep)" >&2; exit 2 ;;
  esac
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/attnviz-wheel.XXXXXX")"
if [ "$KEEP" = 1 ]; then echo "keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
step() { echo "== $*"; }

step "copying the tracked files of $ROOT"
mkdir -p "$TMP/src"
(cd "$ROOT" && git ls-files -z --cached | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf -) | tar -xf - -C "$TMP/src"

step "build and twine in their own environment"
"$PYTHON" -m venv "$TMP/tools"
"$TMP/tools/bin/python" -m pip install --quiet build twine

step "python -m build (sdist, then the wheel from the sdist)"
start=$(date +%s)
"$TMP/tools/bin/python" -m build --outdir "$TMP/dist" "$TMP/src" > "$TMP/build.log" 2>&1 || {
  tail -n 40 "$TMP/build.log" >&2; echo "packaging/check_wheel.sh: the build failed (log above)" >&2; exit 1; }
echo "built in $(( $(date +%s) - start )) s:"
ls -l "$TMP/dist" | tail -n +2

step "twine check"
"$TMP/tools/bin/twine" check --strict "$TMP/dist"/*

step "every file attnviz reads at run time is in the wheel and the sdist"
"$TMP/tools/bin/python" "$ROOT/packaging/wheel_contents.py" "$TMP/src" "$TMP/dist"

step "a fresh environment with the wheel"
"$PYTHON" -m venv "$TMP/app"
start=$(date +%s)
"$TMP/app/bin/python" -m pip install --quiet "$TMP/dist"/attnviz-*.whl
echo "installed in $(( $(date +%s) - start )) s"

# run from an empty folder, with the kernels compiled into the temporary folder (not the user's cache)
mkdir -p "$TMP/run"
cd "$TMP/run"
export QT_QPA_PLATFORM=offscreen NUMBA_CACHE_DIR="$TMP/numba"
unset PYTHONPATH

step "where the installed package and its resources are"
"$TMP/app/bin/python" - "$TMP/app" <<'EOF'
import sys
from pathlib import Path

import attnviz
from attnviz.resources_path import resource_path, resources_root

venv = Path(sys.argv[1]).resolve()
where = {"package": Path(attnviz.__file__).resolve(), "resources": resources_root().resolve()}
for name, path in where.items():
    print(f"{name}: {path}")
    if venv not in path.parents:
        sys.exit(f"the {name} were found outside the fresh environment: {path}")
for parts in (("tokenizer", "tokenizer.json"), ("tokenizer", "corpus.txt"), ("icons", "attnviz.svg")):
    if not resource_path(*parts).is_file():
        sys.exit(f"{'/'.join(parts)} is missing from the installed resources")
EOF

step "attnviz --self-test"
start=$(date +%s)
"$TMP/app/bin/attnviz" --self-test > "$TMP/self-test.json" || { cat "$TMP/self-test.json"; exit 1; }
"$TMP/app/bin/python" - "$TMP/self-test.json" <<'EOF'
import json
import sys

report = json.load(open(sys.argv[1]))
print(f"ok: {report['ok']}, largest difference from the float64 reference: {report['max_abs_diff']}, "
      f"{len(report.get('kernels', {}))} kernels compiled into {report.get('numba_cache')}")
EOF
echo "self-test in $(( $(date +%s) - start )) s (a fresh install compiles every kernel)"

step "attnviz-cli demo --list"
"$TMP/app/bin/attnviz-cli" demo --list

step "attnviz-cli demo vit-image and long-context (an image and the BPE tokenizer from the resources)"
"$TMP/app/bin/attnviz-cli" demo vit-image --save "$TMP/run/vit.attnviz"
"$TMP/app/bin/attnviz-cli" demo long-context --save "$TMP/run/long.attnviz"
ls -l "$TMP/run"/*.attnviz | tail -n +1

echo "wheel check passed"
