"""Models: readers (``readers/``: static SavedModel/GraphDef, traced Keras/live), the
flattened graph (``flatten.py``), the gradient-path analysis (``analysis.py``, walks in
``walks.py``), its results (``results.py``) and ``check`` / ``upgrade_check``
(``check.py``)."""
