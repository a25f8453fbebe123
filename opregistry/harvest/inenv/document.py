"""The harvest document's format: what the collector writes and ``db/validate.py`` checks.

A leaf module with no imports, read by both sides: the collector (in-environment, see
``__init__.py``) and the validator (``opregistry.db``), which imports it without
loading the rest of the harvester.
"""
FORMAT = "opregistry-harvest"
FORMAT_VERSION = 1
MAX_SOURCE = 256 * 1024  # a gradient function's source; longer ones are not kept
