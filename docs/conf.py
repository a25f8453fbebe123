"""Sphinx configuration of the documentation site: ``pip install ".[docs]"`` then
``python -m sphinx -E -W --keep-going -n docs docs/_build`` (tests/test_docs.py builds it)."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

from opregistry import __version__  # noqa: E402
from opregistry.cli.docs import DOCS_URL  # noqa: E402

project = "opregistry"
author = "the opregistry authors"
copyright = "the opregistry authors"
release = __version__
version = __version__

extensions = ["myst_parser", "opregistry_help", "opregistry_reference", "sphinx.ext.autodoc"]
# the API reference (reference.md): signatures without annotations (TensorFlow's objects
# are aliases of Any), members in source order, inherited ones left to their classes
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_docstring_signature = False  # a dataclass's generated docstring is no signature
autodoc_default_options = {"exclude-members": "__init__, __new__"}
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"opregistry {__version__}"
html_baseurl = DOCS_URL
html_theme_options = {"navigation_with_keys": True}

# headings up to ### get GitHub-style anchors, so [text](page.md#a-heading) links resolve
# (and a link to a missing page or anchor is a warning, which -W makes an error)
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
# every reference must resolve (sphinx-build -n)
nitpicky = True
