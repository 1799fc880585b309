"""The attention-mask designer's model: rules, painted cells, the design, presets, design commands,
mask analysis and import / export. Importing the package registers the presets' term evaluators
with the design, so any design can evaluate its preset terms."""

import attnviz.model.mask.presets  # noqa: F401  (registers the preset term evaluators)
