# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+, before anything of the tree)
"""proofgate's start-up hook in every Python process of the test phase (SPEC §3.2).

This file is copied into proofgate's read-only volume as `boot/sitecustomize.py`, and
every test command gets that directory first on `PYTHONPATH`. The interpreter imports
`sitecustomize` while `site` runs, during its own start-up: `sys.path` then holds the
`PYTHONPATH` entries, the standard library and the site directories, but not yet the
script's directory or the working directory (`python -m pytest` puts `/workspace` first
only afterwards). So nothing of the tree can shadow this module, and it runs before any
of the tree's code:

1. It runs the image's own `sitecustomize` (the next one on `sys.path`, by path), which
   this one shadows: the environment stays what the image made it.
2. It puts the witness into `sys.modules` under `proofgate_witness`, loaded from its
   file beside this one: pytest's `-p proofgate_witness` then finds it there, never
   through `sys.path` (where `/workspace` comes first and a root `proofgate_witness.py`
   would win). In a pytest process it is imported at once, with pytest and every plugin
   pytest loads by itself, before the working directory is on `sys.path`: no module of
   the tree can stand in for one of theirs (a root `org/` package that the standard
   library's `copy` tries while pytest starts, a root `shlex.py`), and the witness binds
   what it uses before any of the tree's code has run. In any other process it is loaded
   lazily, on first use, so a Python child that never runs pytest pays nothing for it.

A process started with `-E`, `-I` or `-S` does not run this hook; such a child of a test
gets no witness, and what it imports is the tree's and the environment's
(docs/security.md). It imports nothing of proofgate and touches nothing on disk.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_WITNESS = os.path.join(os.path.dirname(_HERE), "witness", "proofgate_witness")
_NAME = "proofgate_witness"
_PYTEST_SCRIPTS = ("pytest", "py.test", "pytest-3", "py.test-3")


def _image_sitecustomize():
    """The `sitecustomize` this one shadows: the next on `sys.path` (none of the tree's:
    the working directory is not on it yet), run as the interpreter would have."""
    import importlib.util

    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _HERE:
            continue
        for name in ("sitecustomize.py", "sitecustomize/__init__.py"):
            path = os.path.join(entry, name)
            if os.path.isfile(path):
                spec = importlib.util.spec_from_file_location("sitecustomize", path)
                if spec is None or spec.loader is None:
                    return
                module = importlib.util.module_from_spec(spec)
                sys.modules["sitecustomize"] = module
                try:
                    spec.loader.exec_module(module)
                except Exception:  # noqa: BLE001 - as site.py: a failing hook is reported
                    import traceback

                    sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n")
                    traceback.print_exc()
                return


def _runs_pytest():
    """Whether this process is a pytest run: `python -m pytest`, `python -m py.test`,
    or a `pytest` script."""
    argv = list(getattr(sys, "orig_argv", None) or [])
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m":
            return i + 1 < len(argv) and argv[i + 1] in ("pytest", "py.test")
        if arg.startswith("-m"):
            return arg[2:] in ("pytest", "py.test")
        if arg == "-c" or not arg.startswith("-"):
            return os.path.basename(arg) in _PYTEST_SCRIPTS
    return False


def _witness(eager):
    """The witness package, in `sys.modules` under its name, from its own directory."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        _NAME, os.path.join(_WITNESS, "__init__.py"), submodule_search_locations=[_WITNESS]
    )
    if spec is None or spec.loader is None:
        return
    if not eager:
        spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_NAME, None)  # pytest then names the plugin it could not load
        raise


def _pytest_first():
    """pytest and the plugins it loads by itself, imported now, before the tree is on
    `sys.path`; then the witness (which binds what it uses at import)."""
    import importlib

    import _pytest.config as config

    for name in (*config.default_plugins, *getattr(config, "builtin_plugins", ())):
        if name in ("pytester", "pytester_assertions"):
            continue  # loaded by the tests that ask for it, as pytest does
        try:
            importlib.import_module(name if "." in name else "_pytest." + name)
        except ImportError:
            pass  # not in this pytest: it will not load it either
    import copy  # noqa: F401 - imported now: it tries `org.python.core`
    import pickle  # noqa: F401 - the same

    _witness(eager=True)


def _boot():
    _image_sitecustomize()
    if _runs_pytest():
        try:
            _pytest_first()
            return
        except ImportError:
            pass  # no pytest in this interpreter: nothing to witness eagerly
    _witness(eager=False)


_boot()
del _boot
