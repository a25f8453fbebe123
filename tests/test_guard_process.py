"""The guard across threads and processes (issue 35): under a tf.distribute strategy
(its replica threads trace without TF's autograph mapping) the lines named are the
user's, as in a plain tf.function; a fork()ed child never prints the parent's summary;
Ctrl-C under ``opregistry run`` prints the summary once."""
from __future__ import annotations

import os
import signal
import sys
import warnings

import tensorflow as tf
from cli_run import run_cli

import opregistry
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401 (fixture)


def _mirrored(strategy, picked, fine):
    @tf.function
    def step(x):
        def replica(x):
            with tf.GradientTape() as tape:
                loss = tf.cast(tf.argmax(picked * x), tf.float32) + fine  # argmax
            grads = tape.gradient(loss, [picked, fine])  # gradient call
            return [tf.zeros_like(picked) if g is None else g for g in grads]
        return strategy.run(replica, args=(x,))
    return step


def test_the_guard_names_the_users_lines_under_mirrored_strategy():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # one device: still threads
    with strategy.scope():
        picked = tf.Variable([0.5, 1.5], name="picked")
        fine = tf.Variable(2.0, name="fine")
    step = _mirrored(strategy, picked, fine)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        installed = opregistry.guard.install(summary=False)
        try:
            grads = step(tf.constant([1.0, 2.0]))
        finally:
            opregistry.guard.uninstall()
    assert not grads[0].numpy().any() and grads[1].numpy() == 1.0  # TF: none for picked
    (lost,) = installed.lost
    assert lost.target == "variable 'picked'"
    source = _mirrored
    (stop,) = lost.stops
    assert stop.op == "ArgMax" and site(stop) == line_of(source, "argmax")
    call = f"{os.path.abspath(lost.call_site[0])}:{lost.call_site[1]}"
    assert call == line_of(source, "gradient call")
    ours = [w for w in seen if issubclass(w.category, opregistry.NonDifferentiableWarning)]
    assert len(ours) == 1 and "__autograph_generated_file" not in str(ours[0].message)
    assert f"{ours[0].filename}:{ours[0].lineno}" == line_of(source, "gradient call")


def test_a_forked_child_that_stops_the_guard_prints_no_summary():
    v = tf.Variable([0.5, 1.5])
    read, write = os.pipe()
    with warnings.catch_warnings(), opregistry.guard() as guard:  # summary=True
        warnings.simplefilter("ignore")
        with tf.GradientTape() as tape:
            loss = tf.cast(tf.argmax(v), tf.float32)
        tape.gradient(loss, v)
        assert guard.session.policy.entries  # something the summary would say
        pid = os.fork()
        if pid == 0:  # the child: its stderr is the pipe; it stops the guard and exits
            try:
                sys.stderr = os.fdopen(write, "w")  # what the summary is printed to
                guard.stop()
                sys.stderr.flush()
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        said = os.read(read, 65536)
        os.close(read)
        assert said == b"", said


def test_interrupted_and_forked_under_run_the_summary_is_printed_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import os, signal, sys\n"
        # Ctrl-C as a terminal delivers it: a parent that ignores SIGINT (a background
        # job, nohup, some CI runners) passes SIG_IGN on, and Python then keeps it
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import tensorflow as tf\n"
        "v = tf.Variable([0.5, 1.5])\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = tf.cast(tf.argmax(v), tf.float32)\n"
        "tape.gradient(loss, v)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)  # the child leaves through the script's end\n"
        "os.waitpid(pid, 0)\n"
        f"os.kill(os.getpid(), {int(signal.SIGINT)})  # Ctrl-C\n"
        "print('not reached')\n")
    done = run_cli("run", str(script))
    assert done.returncode == 130, done.stderr
    assert "not reached" not in done.stdout
    assert "KeyboardInterrupt" in done.stderr
    assert done.stderr.count("opregistry.guard: 1 target without a gradient") == 1, \
        done.stderr
