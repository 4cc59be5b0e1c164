"""LanceDB, imported once and without the namespace REST client it does not use here.

`import lancedb` imports `lance_namespace`, whose generated REST client package
(`lance_namespace_urllib3_client`) builds a pydantic validator for each of its ~370 API methods
when its `__init__` runs: 1.0 of the 2.4 s that `import lancedb` took on two cores, paid by
every `hydra-rag search`. Local tables never call that client; `lance_namespace` needs only its
`models` subpackage. So the package's `__init__` is deferred: its submodules import as usual,
and the first read of any other name from the package itself runs the real `__init__` (the
same module object, so nothing imported later can tell the difference).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from typing import Any

from hydra_rag.store.loop_thread import before_lancedb_exits

_CLIENT = "lance_namespace_urllib3_client"


class _Deferred(types.ModuleType):
    """A package whose `__init__` runs on the first read of a name it does not have yet."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        if spec is None or spec.loader is None or self.__class__ is not _Deferred:
            raise AttributeError(name)
        self.__class__ = types.ModuleType  # type: ignore[assignment]  # a plain module now
        spec.loader.exec_module(self)
        return getattr(self, name)


def _defer_client() -> None:
    if _CLIENT in sys.modules:
        return
    spec = importlib.util.find_spec(_CLIENT)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # another layout: import it the usual way
    module = _Deferred(_CLIENT)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = _CLIENT
    sys.modules[_CLIENT] = module


def lancedb() -> Any:
    """The `lancedb` module."""
    if "lancedb" in sys.modules:
        return sys.modules["lancedb"]
    # Lance logs warnings (e.g. "no existing dataset, it will be created") to stderr.
    os.environ.setdefault("LANCEDB_LOG", "error")
    _defer_client()
    import lancedb as module

    before_lancedb_exits()  # its core registers an exit hook when it loads
    return module
