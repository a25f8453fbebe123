"""Whose code a frame is: opregistry's own files are a library's, the user's files next
to it (a clone's tests, an editable install's scripts) are not."""
from __future__ import annotations

from pathlib import Path

import opregistry
from opregistry import creation_sites as sites


def test_opregistry_is_a_library_and_its_neighbours_are_not():
    sites.reset()
    package = Path(opregistry.__file__).parent
    assert sites.is_library_file(str(package / "guard" / "hooks.py"))
    assert sites.is_library_file(str(package / "creation_sites.py"))
    if "/site-packages/" not in str(package):  # a clone: its tests are the user's code
        assert not sites.is_library_file(str(package.parent / "tests" / "test_guard.py"))
    assert not sites.is_library_file(__file__) or "/site-packages/" in __file__
