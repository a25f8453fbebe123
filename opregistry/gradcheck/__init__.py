"""Numerical gradient checking (``opregistry.gradcheck``; a package of that name would
shadow the function once imported): result types (``results.py``), the checked call and
its float64 version (``subject.py``), the finite-difference math (``differences.py``,
pure functions), the checker (``checker.py``), the static explanation (``explain.py``)
and the command-line targets (``targets.py``)."""
