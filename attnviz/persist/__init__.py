"""Session files (.attnviz) and autosave. No Qt. Imports model (and below)."""
