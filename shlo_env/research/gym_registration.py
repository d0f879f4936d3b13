"""`shlo_env/Rewrite-v0` is registered with Gymnasium as soon as both packages are imported.

`import shlo_env` calls `install()`: if gymnasium is already imported the id is registered at
once; otherwise a meta-path hook waits for gymnasium's own import and registers right after it,
so gymnasium is never imported (or required) by shlo_env itself, and
`gym.make("shlo_env/Rewrite-v0")` needs no second import.
"""

from __future__ import annotations

import importlib.abc
import sys

ENV_ID = "shlo_env/Rewrite-v0"
ENTRY_POINT = "shlo_env.research.gym_env:RewriteEnv"


def register(gym) -> None:
    """Register the id with the gymnasium module `gym` (once)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=ENTRY_POINT)


class _Loader(importlib.abc.Loader):
    """gymnasium's own loader, registering our id once gymnasium's __init__ has run."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__spec__.loader = module.__loader__ = self.loader  # leave no trace of the hook
        self.loader.exec_module(module)
        uninstall()
        register(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "gymnasium":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_HOOK = _Hook()


def install() -> None:
    gym = sys.modules.get("gymnasium")
    if gym is not None:
        register(gym)
    elif _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def uninstall() -> None:
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
