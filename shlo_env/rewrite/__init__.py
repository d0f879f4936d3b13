"""Rewriting: the driver (augment, apply, prune) and the pick-first rule; patterns live in `shlo_env.patterns`."""
