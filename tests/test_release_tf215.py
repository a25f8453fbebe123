"""The default-release rule under a TensorFlow the database does not hold: with TF
2.15.0 installed and no ``--tf``, check, gradcheck and the API use 2.15.1's facts and
say so on stderr, as upgrade-check's default ``--from`` does (the guard:
tests/test_guard_tf215.py, in the same venv). The model
is a gradient penalty through a bilinear resize, for which TF 2.15.0 itself raises
``LookupError`` (ResizeBilinearGrad has no gradient until 2.18): blocked, exit 1 (the
newest release's facts, where its gradient is registered as None, said "0 blocked").
"""
from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from tf215_venv import HELD, INSTALLED, env, tf215_python  # tests/ is on sys.path

NOTE = (f"facts of TensorFlow {HELD}: the nearest release in the database to the "
        f"installed TensorFlow {INSTALLED}")

MODEL = textwrap.dedent("""
    import tensorflow as tf


    class Penalty(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.fill([1, 4, 4, 1], 0.5), name="w")

        @tf.function(input_signature=[tf.TensorSpec([1, 4, 4, 1], tf.float32)])
        def __call__(self, x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.image.resize(x * self.w, [8, 8], method="bilinear")
                inner = tf.reduce_sum(y * y)
            g = tape.gradient(inner, x)
            return {"penalty": tf.reduce_sum(g * g)}


    def build():
        return Penalty(), [tf.random.stateless_uniform([1, 4, 4, 1], [1, 2])]
""")

# TF 2.15.0 is the oracle; then the API, in the same process
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import tensorflow as tf
    sys.path.insert(0, sys.argv[1])
    import model
    import opregistry
    from opregistry.registry.release_choice import ReleaseWarning

    module, inputs = model.build()
    tf.saved_model.save(module, sys.argv[2])
    try:
        with tf.GradientTape() as tape:
            out = module(*inputs)["penalty"]
        tape.gradient(out, module.w)
        raised = ""
    except LookupError as exc:
        raised = str(exc)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        checked = opregistry.check(sys.argv[2])
        graded = opregistry.gradcheck(module, *inputs)
    print(json.dumps({
        "tf": tf.__version__, "raised": raised,
        "check": [checked.release, sorted({b.op for f in checked.findings for b in f.stops})],
        "gradcheck": [graded.release, graded.ok],
        "warnings": [str(w.message) for w in said if w.category is ReleaseWarning],
    }))
""")


@pytest.fixture(scope="module")
def penalty(tmp_path_factory):
    """(python, folder with model.py, SavedModel path, what the script printed)."""
    python = tf215_python()
    folder = tmp_path_factory.mktemp("penalty")
    (folder / "model.py").write_text(MODEL)
    (folder / "run.py").write_text(SCRIPT)
    saved = folder / "saved"
    done = subprocess.run([str(python), str(folder / "run.py"), str(folder), str(saved)],
                          capture_output=True, text=True, env=env(), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return python, folder, saved, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_tensorflow_2_15_0_raises_and_the_api_uses_2_15_1(penalty):
    *_, printed = penalty
    assert printed["tf"] == INSTALLED
    assert "ResizeBilinearGrad" in printed["raised"]  # the oracle: TF raises
    release, stopping = printed["check"]
    assert release == HELD and "ResizeBilinearGrad" in stopping
    assert printed["gradcheck"] == [HELD, False]
    assert printed["warnings"] and set(printed["warnings"]) == {NOTE}


@pytest.mark.slow
def test_check_and_gradcheck_commands_use_2_15_1_and_say_so(penalty):
    python, folder, saved, _ = penalty
    done = subprocess.run([str(python), "-m", "opregistry", "check", str(saved)],
                          capture_output=True, text=True, env=env(), timeout=600)
    assert done.returncode == 1, done.stderr  # blocked, as TF 2.15.0 raises
    assert NOTE in done.stderr.splitlines(), done.stderr
    assert f"against TensorFlow {HELD}" in done.stderr
    assert "ResizeBilinearGrad" in done.stdout
    done = subprocess.run([str(python), "-m", "opregistry", "gradcheck",
                           f"{folder / 'model.py'}:build", "-f", "json"],
                          capture_output=True, text=True, env=env(), timeout=900)
    assert done.returncode == 1, done.stderr
    assert NOTE in done.stderr.splitlines(), done.stderr
    assert json.loads(done.stdout)["release"] == HELD
    # upgrade-check without --from: from the same release, read statically (no TF)
    done = subprocess.run([str(python), "-m", "opregistry", "upgrade-check", str(saved),
                           "--to", "2.21"], capture_output=True, text=True, env=env(),
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"--from: {NOTE}" in done.stderr.splitlines(), done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"{HELD} -> 2.21.0: "), done.stderr
