"""``opregistry.keras.GradientGuard``: the guard as a Keras callback.

``model.fit(..., callbacks=[GradientGuard(action="raise")])`` guards the training from
its first step (Keras traces the train step then) to its end, where the summary is
printed. Works with Keras 3 (TensorFlow backend) and tf-keras / Keras 2.
"""
from __future__ import annotations

from typing import Any

from opregistry.db.location import DbLike
from opregistry.model.readers.traced import import_keras

_keras = import_keras()


class GradientGuard(_keras.callbacks.Callback):  # type: ignore[misc,name-defined]
    """Keras callback with the options of ``opregistry.guard()``; ``guard`` is the
    Guard of the last ``fit`` (what it found: ``guard.lost``)."""

    def __init__(self, action: str = "warn", ignore: Any = None, *,
                 release: str | None = None, db: DbLike = None, summary: bool = True):
        super().__init__()
        from opregistry.guard import Guard

        self._options = dict(action=action, ignore=ignore, release=release, db=db,
                             summary=summary)
        Guard(**self._options)  # options checked now, not at the first step
        self.guard: Any = None

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        from opregistry.guard import Guard

        if self.guard is not None and self.guard.running:
            self.guard.stop()  # a fit that ended in an error never called on_train_end
        self.guard = Guard(**self._options).start()
        # Keras calls no callback when fit ends in an error: the guard's own error
        # (action="raise") uninstalls it on its way out
        self.guard.session.on_raise = self.guard.stop

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        if self.guard is not None and self.guard.running:
            self.guard.stop()
