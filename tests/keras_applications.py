"""``check`` (and ``check --xla``) on keras.applications models built with
``weights=None`` and saved as ``.keras``, in one process: none may end in an error
(the traced input sizes are the model's own: unknown ones stay unknown), and no site
may point anywhere (a ``.keras`` file's ops were made by Keras, from no line of the
user's). ``include_top=False``: every model then has unknown spatial dimensions (the
case that broke) and its file stays small.

``python tests/keras_applications.py [NAME ...]`` runs every model (or those named) and
prints one line per model; the test suite runs ``CI_MODELS``.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# one small model per input-handling family the suite can afford (the issue's
# MobileNetV3Small is also checked with its top, in tests/test_keras_applications.py)
CI_MODELS = ("MobileNetV3Small", "MobileNet")


def all_models() -> list[str]:
    import keras

    return sorted(n for n in dir(keras.applications)
                  if n[0].isupper() and callable(getattr(keras.applications, n)))


def check_one(name: str, folder: Path, **options: Any) -> tuple[Any, float]:
    """Build, save and check one model: its result and the seconds it took. Any
    error propagates (the CLI would show it as a traceback, or as an Error line)."""
    import keras

    import opregistry

    start = time.monotonic()
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, **options)
    path = folder / f"{name}.keras"
    model.save(path)
    del model
    keras.backend.clear_session()
    result = opregistry.check(path, xla=True)
    path.unlink()
    return result, time.monotonic() - start


def problems(result: Any) -> list[str]:
    """What a .keras result must not have: sites (no user line made its ops)."""
    sites = [b.site for b in result.stops if b.site] + \
        [x.site for x in result.xla or () if x.site]
    return [f"a site: {s}" for s in sites]


def main(names: list[str]) -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for name in names or all_models():
            try:
                result, seconds = check_one(name, Path(folder), include_top=False)
            except Exception as exc:  # noqa: BLE001 - reported, counted
                failed += 1
                print(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                continue
            found = problems(result)
            failed += bool(found)
            print(f"{name}: {len(result.outputs)} output(s), {len(result.findings)} "
                  f"finding(s), XLA {[o.xla for o in result.outputs]}, {seconds:.0f} s"
                  + (f"; {found}" if found else ""), flush=True)
    print(f"{failed} of {len(names or all_models())} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
