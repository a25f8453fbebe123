"""What every in-environment module shares.

In-environment code (see ``__init__.py``): standard library only, Python 3.7+.
"""
from __future__ import print_function

import os

# The script the runner runs under the target interpreter, and the probe workers too.
ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def one_line(exc):
    """An exception as one line: its type and the first line of its message."""
    text = "%s: %s" % (type(exc).__name__, exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
