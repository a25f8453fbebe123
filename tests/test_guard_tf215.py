"""The guard under tf-keras (Keras 2) in TensorFlow 2.15.0, a patch the database does
not hold (it judges by 2.15.1's facts, and says so), in a venv of its own
(tests/tf215_venv.py: built once, cached beside the harvest venvs)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from tf215_venv import HELD, INSTALLED, env, tf215_python  # tests/ is on sys.path

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


@pytest.mark.slow
def test_tf_keras_fit_under_tf_2_15(tmp_path):
    python = tf215_python()
    script = tmp_path / "keras2_fit.py"
    script.write_text(SCRIPT)
    done = subprocess.run([str(python), str(script)], capture_output=True, text=True,
                          env=env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tf_none"] == ["blocked/bias", "blocked/kernel"]
    assert result["lost"] == [f"variable '{n}'" for n in result["tf_none"]]
    argmax_line = SCRIPT.splitlines().index(next(
        line for line in SCRIPT.splitlines() if line.endswith("# argmax"))) + 1
    assert result["stops"] == [["ArgMax", "none", argmax_line]]
    assert result["facts"] == (f"facts of TensorFlow {HELD} from the database, the nearest "
                               f"release to the installed {INSTALLED}")
    assert sys.version_info >= (3, 9)
