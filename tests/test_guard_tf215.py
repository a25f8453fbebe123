"""The guard under tf-keras (Keras 2) in TensorFlow 2.15, a release of the database,
in a venv of its own (built once, cached beside the harvest venvs)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opregistry.harvest import environments, recipes

ROOT = Path(__file__).resolve().parent.parent
RELEASE = "2.15.1"

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorflow as tf
    import opregistry
    from opregistry.keras import GradientGuard

    import keras
    assert keras.__version__.startswith("2."), keras.__version__  # Keras 2
    inp = tf.keras.Input((4,))
    trunk = tf.keras.layers.Dense(3, name="trunk")(inp)
    blocked = tf.keras.layers.Dense(3, name="blocked")(trunk)
    picked = tf.keras.layers.Lambda(lambda t: tf.cast(tf.argmax(t, axis=-1), tf.float32)[:, None])(blocked)  # argmax
    fine = tf.keras.layers.Dense(1, name="fine")(trunk)
    model = tf.keras.Model(inp, [picked, fine])
    model.compile("sgd", ["mse", "mse"])
    x = np.ones((8, 4), "float32"); y = np.ones((8, 1), "float32")
    callback = GradientGuard()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, [y, y], epochs=2, verbose=0, callbacks=[callback])
    with tf.GradientTape() as tape:
        outs = model(x, training=True)
        loss = tf.reduce_sum(outs[0]) + tf.reduce_sum(outs[1])
    grads = tape.gradient(loss, model.trainable_weights)
    print(json.dumps({
        "tf_none": sorted(v.name[:-2] for v, g in zip(model.trainable_weights, grads) if g is None),
        "lost": sorted(l.target for l in callback.guard.lost),
        "stops": sorted({(s.op, s.reason, int(s.site.rsplit(":", 1)[1])) for l in callback.guard.lost for s in l.stops}),
        "facts": callback.guard.lost[0].facts if callback.guard.lost else "",
    }))
""")


def guard_venv() -> Path:
    """tensorflow-cpu 2.15.1 (Python 3.10, per the harvest recipe) plus this project,
    editable: cached under the runner's cache folder, built the first time. The project
    is installed again when pyproject.toml changed (a dependency added since) or the venv
    points at another checkout."""
    recipe = recipes.recipe_for(RELEASE)
    venv = environments.cache_dir() / "venvs" / f"guard-{recipe.name}"
    with environments.building(venv):  # one worker builds it, the others wait
        return _guard_venv(recipe, venv)


def _guard_venv(recipe: recipes.Recipe, venv: Path) -> Path:
    python = venv / "bin" / "python"
    ready = venv / ".opregistry-guard-ready"
    # editable: the checkout it points at is part of the stamp (another clone's venv
    # would run that clone's code)
    stamp = (f"{RELEASE} {ROOT} "
             f"{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()}\n")
    if ready.exists() and python.exists() and ready.read_text() == stamp:
        return python
    if not python.exists():
        base = environments.find_python(recipe.python)
        if base is None:
            pytest.skip(f"no Python {recipe.python} for TensorFlow {RELEASE}")
        subprocess.run([str(base), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *recipe.requirements], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-e", str(ROOT)], check=True)
    ready.write_text(stamp)
    return python


@pytest.mark.slow
def test_tf_keras_fit_under_tf_2_15(tmp_path):
    python = guard_venv()
    script = tmp_path / "keras2_fit.py"
    script.write_text(SCRIPT)
    # the editable install points at the repository this test runs from
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(python), str(script)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tf_none"] == ["blocked/bias", "blocked/kernel"]
    assert result["lost"] == [f"variable '{n}'" for n in result["tf_none"]]
    argmax_line = SCRIPT.splitlines().index(next(
        line for line in SCRIPT.splitlines() if line.endswith("# argmax"))) + 1
    assert result["stops"] == [["ArgMax", "none", argmax_line]]
    assert "TensorFlow 2.15.1" in result["facts"]
    assert sys.version_info >= (3, 9)
