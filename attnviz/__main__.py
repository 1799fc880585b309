"""``python -m attnviz`` opens the desktop application."""

from attnviz.ui.app import main

if __name__ == "__main__":
    raise SystemExit(main())
