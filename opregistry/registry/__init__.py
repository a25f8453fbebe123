"""The registry queries: ``lookup``, ``ops``, ``releases`` (``lookup.py``), ``diff``
(``diff.py``) and ``probe_report`` (``probe_report.py``), plain functions returning
frozen dataclasses. Importing this package stays cheap: no SQLAlchemy, no TensorFlow."""
