"""Importing LanceDB: its Rust log quieted, and half of its import cost left out.

``import lancedb`` costs about 0.9 s of interpreter time here, and it runs in the
background open while the first calls wait (``bench/first_call.py``). About half of it is
the package ``__init__`` of ``lance_namespace_urllib3_client``, the generated REST client
of Lance namespaces: it imports every API class (``table_api`` alone ~0.4 s) although a
LanceDB database opened from a path or an object-store URI uses only its ``models``
submodule (``lance_namespace`` imports the request models from there).

So before LanceDB's import, that package is registered with its real path but without
running its ``__init__``: ``lance_namespace_urllib3_client.models`` imports from the real
files as usual, and the first access to anything else of the package itself (a REST
namespace's ``ApiClient``, say) runs the real ``__init__`` then and answers as before.
Nothing is patched when the package is already imported or cannot be found.
"""

import importlib.util
import os
import sys
import types
from typing import Any

__all__ = ["import_lancedb"]

REST_CLIENT = "lance_namespace_urllib3_client"


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs at the first attribute it does not have yet."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        assert spec is not None
        assert spec.loader is not None
        self.__class__ = types.ModuleType  # type: ignore[assignment]  # from here on, an ordinary module
        code = spec.loader.get_code(spec.name)  # type: ignore[attr-defined]  # a source loader
        exec(code, self.__dict__)
        return getattr(self, name)


def defer_package_init(name: str) -> bool:
    """Register package ``name`` without running its ``__init__`` yet; False when it is
    already imported or not an importable package."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None or not hasattr(spec.loader, "get_code"):
        return False
    module = _DeferredPackage(name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    sys.modules[name] = module
    return True


def import_lancedb() -> Any:
    """``import lancedb``, its Rust log and Lance's quieted to errors unless the user chose
    a level (``LANCEDB_LOG`` and ``LANCE_LOG`` are read when the libraries load; the one
    place they are set), a vector index's statistics without its centroids, the REST
    client's API classes deferred. (The purge's index merges warn once per empty vector
    partition, a hundred lines on stderr at 1M memories, none of them a problem.)"""
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("LANCE_LOG", "error")
    # The purge reads a vector index's partition sizes (``purge_steps.prune_vectors``), never
    # its centroids: Lance 13 includes them unless told (memory), and warns on each read.
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
    defer_package_init(REST_CLIENT)
    import lancedb

    return lancedb
