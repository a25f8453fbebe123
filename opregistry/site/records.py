"""The records of the site's export (``data/ops.json``, built by ``export.py``): an op
with its entry per release, a release, a diff; JSON objects read by key, so one name
for all of them."""
from __future__ import annotations

from typing import Any

Record = dict[str, Any]  # one JSON object of the export
