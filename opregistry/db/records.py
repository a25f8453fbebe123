"""Names for the JSON the loader reads and the rows it writes: a harvest document (or
one of its objects: a release, an op, a probe) is a ``Document``; the columns of a row
to insert, by name, are a ``Row``. Both are plain dicts, read and written by key."""
from __future__ import annotations

from typing import Any

Document = dict[str, Any]  # a harvest document, or one JSON object inside it
Row = dict[str, Any]  # a row's columns by name
