"""A training loop whose loss goes through tf.argmax: two of its variables never learn.

    opregistry run examples/guard_argmax.py
"""
import tensorflow as tf

w = tf.Variable([[0.5, -0.2], [0.1, 0.3]], name="w")
b = tf.Variable([0.0, 0.0], name="b")
scale = tf.Variable(1.0, name="scale")
x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
y = tf.constant([1.0, 0.0])

for step in range(3):
    with tf.GradientTape() as tape:
        logits = x @ w + b
        picked = tf.cast(tf.argmax(logits, axis=1), tf.float32)
        loss = tf.reduce_mean((scale * picked - y) ** 2)
    grads = tape.gradient(loss, [w, b, scale])
    scale.assign_sub(0.1 * grads[2])
print("trained 3 steps; loss", round(float(loss), 3))
