"""Reusable Qt widgets of the desktop application: heatmaps, small multiples, the patch-image view,
the mask-painting canvas and token chips. They take plain numpy arrays, label lists and segments,
and report what the person does through Qt signals; they know nothing about sessions or files."""
