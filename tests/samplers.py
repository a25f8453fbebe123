"""Models whose gradient comes from a sampler's own gradient (implicit
reparameterisation): TFP's reparameterised distributions (a saved ``tf.custom_gradient``
around the sampler) and TF's gamma samplers (``StatelessRandomGammaV3`` and
``RandomGamma``, differentiated by ``RandomGammaGrad``), each with a second output that
does not use the sampler's variable (unrelated pairs) and one through ``tf.round``
(a blocked pair)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from corpus import Entry

SEED = (1, 2)


def _samplers() -> dict[str, Callable[[Any], Any]]:
    """name -> sample(positive parameter vector of 3) -> float samples."""
    import tensorflow as tf

    samplers: dict[str, Callable[[Any], Any]] = {
        "stateless_gamma": lambda c: tf.random.stateless_gamma([4, 3], SEED, alpha=c),
        "random_gamma": lambda c: tf.random.gamma([4], alpha=c, seed=7),
    }
    try:
        import tensorflow_probability as tfp
    except ImportError:  # pragma: no cover - the test extra installs it
        return samplers
    tfd = tfp.distributions
    samplers.update({
        "tfp_gamma": lambda c: tfd.Gamma(concentration=c, rate=1.).sample(4, seed=SEED),
        "tfp_beta": lambda c: tfd.Beta(c, c[::-1]).sample(4, seed=SEED),
        "tfp_dirichlet": lambda c: tfd.Dirichlet(c).sample(4, seed=SEED),
        "tfp_student_t": lambda c: tfd.StudentT(df=c + 2., loc=0., scale=1.).sample(
            4, seed=SEED),
    })
    return samplers


def _module(sample: Callable[[Any], Any]) -> Any:
    import tensorflow as tf

    class Sampler(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.v = tf.Variable([0.5, 1.0, 1.5])  # through the sampler
            self.w = tf.Variable([0.2, -0.3, 0.4])  # not through it

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def __call__(self, x: Any) -> Any:
            s = sample(tf.nn.softplus(self.v * x))
            return {"sample": tf.reduce_mean(s, axis=0) * self.w,
                    "plain": tf.tanh(x * self.w),
                    "rounded": tf.round(self.v * 3.0) + x}

    return Sampler()


def _keras_model(sample: Callable[[Any], Any]) -> Any:
    import keras
    import tensorflow as tf

    class SampleLayer(keras.layers.Layer):
        def build(self, shape: Any) -> None:
            self.v = self.add_weight(shape=(3,), initializer="ones", name="v")

        def call(self, x: Any) -> Any:
            return tf.reduce_mean(sample(tf.nn.softplus(self.v * x[0])), axis=0)[None] * x

    x = keras.Input(batch_shape=(1, 3))
    sampled = SampleLayer(name="sampler")(x)
    plain = keras.layers.Dense(3, name="plain")(x)
    return keras.Model(x, {"sample": sampled, "plain": plain})


def build(root: Path, names: list[str] | None = None) -> list[Entry]:
    """Each sampler as a tf.Module saved with tf.saved_model.save and in a Keras 3
    model exported with model.export."""
    import tensorflow as tf

    entries = []
    for name, sample in _samplers().items():
        if names and name not in names:
            continue
        module = _module(sample)
        path = root / f"{name}-saved"
        tf.saved_model.save(module, str(path), signatures=module.__call__)
        entries.append(Entry(f"{name}-saved", path, module.__call__,
                             (tf.constant([1.0, 0.5, 2.0]),), ["tf.saved_model.save"],
                             keep=module))
        model = _keras_model(sample)
        path = root / f"{name}-export"
        model.export(str(path), verbose=False)
        entries.append(Entry(f"{name}-export", path, model,
                             (tf.constant([[1.0, 0.5, 2.0]]),), ["model.export"]))
    return entries
