"""Execution: PJRT compile and run, the runner protocol, the isolated worker, XLA actions."""
