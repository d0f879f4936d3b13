"""Learned models over shlo_env graphs (issue 13). So far: the measurement dataset
(`shlo_env.learn.dataset`, `shlo-env dataset build|export`); see docs/learned.md."""
