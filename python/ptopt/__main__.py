"""``python -m ptopt ARGS``: the ``ptopt`` command line, as the ``ptopt``
command runs it (python/ptopt-command): the C++ executable, with the same
arguments and exit code (this process becomes it).

The executable is the one built with this package: ``ptopt/_bin/ptopt`` in a
pip install, ``tools/ptopt`` of the build tree for the package in
``build/python`` (PYTHONPATH or scripts/link-python.sh). This file imports
nothing from the package, so that the ``ptopt`` command can run it without
importing torch.
"""

import os
import sys


def executable():
    """The path of the ptopt command line built with this package, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    for exe in (os.path.join(here, "_bin", "ptopt"),                 # pip install
                os.path.join(here, os.pardir, os.pardir, "tools", "ptopt")):  # build/python/ptopt -> build/tools/ptopt
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return os.path.normpath(exe)
    return None


def main(argv=None):
    exe = executable()
    if exe is None:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.stderr.write(f"ptopt: no ptopt command line beside this package ({here}/_bin/ptopt): "
                         "reinstall it (pip install --no-build-isolation .) or build the ptopt target\n")
        return 1
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["ptopt", *args])  # returns only by raising OSError


if __name__ == "__main__":
    sys.exit(main())
