"""The package version, at the bottom so that any module can read it without importing the
`shlo_env` package (whose `__init__` imports nearly every module)."""

__version__ = "0.1.0"  # keep equal to pyproject.toml's `version`
