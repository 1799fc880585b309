"""``python -m attnviz.cli``."""

from attnviz.cli import main

raise SystemExit(main())
