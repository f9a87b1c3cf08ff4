"""dsreg: a versioned registry for ML evaluation sets.

Every command of the ``dsreg`` CLI is a function here, with the same arguments and options
(``dsreg.add``, ``dsreg.tag``, ``dsreg.checkout``, ``dsreg.push``, …), and every type they
return and error they raise is a name here too: the names of :mod:`dsreg.api`, listed there once.

>>> import dsreg
>>> ds = dsreg.open("cifar10-test@cleaned-v1")   # doctest: +SKIP
>>> ds.digest                                     # the full revision digest: pin and cite it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsreg import api
from dsreg._util.pages import numpy_small_pages

# numpy's huge-page advice off for this process, before anything here imports numpy: dsreg's
# large arrays are touched once, and a fresh huge page costs several times what small pages do
# in a VM that returns free memory to its host (dsreg._util.pages; NUMPY_MADVISE_HUGEPAGE, when
# set, is left as it is).
numpy_small_pages()

if TYPE_CHECKING:
    from dsreg.api import *  # noqa: F403  (the names dsreg exports: dsreg.api lists them)
    from dsreg.api import __version__ as __version__  # a star import skips dunder names
else:

    def __getattr__(name: str) -> Any:
        """``dsreg.X`` is ``dsreg.api.X``, imported on first use (PEP 562): each command
        imports this package first, and the modules behind the names would otherwise cost it
        pyarrow, DuckDB and a large part of a second before it does anything."""
        try:
            value = getattr(api, name)
        except AttributeError:
            raise AttributeError(f"module 'dsreg' has no attribute {name!r}") from None
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(api.__all__))
