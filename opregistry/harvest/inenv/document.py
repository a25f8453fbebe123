"""The harvest document's format: what the collector writes and ``db/validate.py`` checks.

A leaf module with no imports, read by both sides: the collector (in-environment, see
``__init__.py``) and the validator (``opregistry.db``), which imports it without
loading the rest of the harvester.
"""
FORMAT = "opregistry-harvest"
# 2: probe records may hold ``xla`` (issue 25); 3: a probe's input rows may hold
# ``outputs``, what each output's upstream gives the input; 4: an op without a registered
# gradient may hold ``xla`` (its forward compiled alone); 5: an ``xla`` record may hold
# ``variants``, the op compiled per value of the attributes its XLA kernel tests;
# readers accept 1 to 5
FORMAT_VERSION = 5
MAX_SOURCE = 256 * 1024  # a gradient function's source; longer ones are not kept
