"""Compile the solver's kernels (and the collision check's) into numba's disk cache ahead of time.

    python -m direction_up_ik.precompile [--quiet]      (console script: direction_up_ik_precompile)

A deployment runs it once after installing (or after a numba or Python upgrade) so that no
robot in a cell compiles at run time; the node and the MoveIt plugin otherwise compile in
the background on their first start and answer with the numpy backend meanwhile. It waits
for another process that is compiling the same kernels, and loads them (about a second)
when they are cached already.

Where the cache lives: ``NUMBA_CACHE_DIR`` when set; else ``__pycache__`` next to the
kernels' sources when that is writable (a source checkout); else numba's per-user cache
(``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``), e.g. for an install tree owned by another
user. Run it as the user (and with the environment) the node runs with.

Exit code 0 when the kernels are ready, 1 when numba is unavailable or switched off
(``DIRECTION_UP_IK_BACKEND=numpy``).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)

    from .core import backend

    module = backend.compiled_module()
    seconds = backend.warm_up_backend()
    if seconds is None:
        reason = module if isinstance(module, Exception) else f"{backend.BACKEND_ENV}=numpy"
        print(f"direction_up_ik_precompile: the compiled backend is unavailable ({reason})", file=sys.stderr)
        return 1
    if not args.quiet:
        folder = module.cache_folder() or "none writable: every process compiles the kernels itself"
        print(f"direction_up_ik_precompile: kernels ready in {seconds:.1f} s (cache: {folder})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
