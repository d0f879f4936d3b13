"""The front end: `optimize`, `jit`, the file CLI and the persistent cache of searches."""
