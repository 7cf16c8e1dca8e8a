"""Evaluation of trained agents: the protocols (`protocol_registry.PROTOCOLS`), human-normalized
scores, snapshot loading and human start points. It never imports `replay`, `training` or
`reporting`; nothing is imported here, so that `reporting` can use `evaluation.scores` without
loading torch."""
