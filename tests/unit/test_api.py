"""The public API: every name in ``opregistry.__all__`` resolves, and every error the
library raises for bad input is an OpregistryError."""
from __future__ import annotations

import pytest

import opregistry


@pytest.mark.parametrize("name", opregistry.__all__)
def test_every_exported_name_resolves(name):
    value = getattr(opregistry, name)
    if name.endswith("Error"):
        assert issubclass(value, opregistry.OpregistryError), name
