"""The hooks: TensorFlow's gradient entry points wrapped while a guard is installed.

``tf.GradientTape.gradient`` and ``jacobian`` (eager and while a tf.function traces:
Keras 3 and tf-keras ``fit``, ``train_on_batch`` and custom ``train_step`` all call
it), and ``tf.gradients``. Entering a tape eagerly starts an op record for it. In a
tf.function the hook runs only while the function traces, so a traced train step
costs nothing per step; the analysis of a graph is kept per (graph, call).
TensorFlow is patched while any guard runs; each call goes to the guard of its thread
(``session_here``).
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from opregistry.creation_sites import call_site, user_frame_site
from opregistry.guard.eager import EagerLog
from opregistry.tf_types import GradientTape, Graph, Nest, Passed, TFCallable

if TYPE_CHECKING:
    from opregistry.guard.session import Session

_LOG_ATTR = "_opregistry_guard_log"
# in a graph (a tf.function tracing): [graph, ops before, ops at the end or None] per
# stretch while the tape recorded (counts of the graph's ops, which are kept in the
# order of their creation); ops outside them are not on the tape
_SPANS_ATTR = "_opregistry_guard_spans"


class _State(threading.local):
    def __init__(self) -> None:
        self.busy = False  # inside a hook: the gradient's own ops are not the user's
        self.logs: list[EagerLog] = []  # the records of the eager tapes now recording
        # TF keeps op callbacks per thread, so do we: the installation (a count of
        # them) in which this thread's callback went in, -1 when it is not in
        self.callback_in = -1
        self.sessions: list[Session] = []  # this thread's guards, innermost last


_state = _State()
_lock = threading.Lock()
_installed: dict[tuple[object, str], TFCallable] = {}  # (owner, attribute) -> original
_program: list[Session] = []  # the sessions of program-wide guards, last started last
_running: list[tuple[Session, list[Session]]] = []  # every running session and its list
# each thread's op-callback list our callback went into (TF keeps one per thread), so
# the last guard to stop can take it out of every thread's, and TF's execute function
_callback_lists: list[list[TFCallable]] = []
_original_execute: TFCallable | None = None
_installation = 0  # counts the times TensorFlow was patched


def _thread_state() -> _State:
    """This thread's state, its records dropped if they are from an installation that
    ended since (the last guard stopped in another thread)."""
    state = _state
    if state.callback_in not in (-1, _installation):
        state.callback_in = -1
        state.logs.clear()
    return state


def session_here() -> Session | None:
    """The session that receives this thread's gradient calls: the innermost guard
    started in this thread, else the last program-wide one, else None."""
    sessions = _state.sessions
    if sessions:
        return sessions[-1]
    return _program[-1] if _program else None


def active() -> bool:
    """Whether any guard, in any thread, is running (TensorFlow is patched)."""
    return bool(_running)


def add(session: Session, program_wide: bool = False) -> list[Session]:
    """Start directing gradient calls to ``session``: this thread's (or, program-wide,
    every thread's without a guard of its own); TensorFlow is patched by the first.
    Returns the list it went on, for ``remove``."""
    owner = _program if program_wide else _state.sessions
    with _lock:
        if not _running:
            try:
                _patch_tensorflow()
            except BaseException:  # no TensorFlow, say: nothing half-patched stays
                _unpatch_tensorflow()
                raise
        owner.append(session)
        _running.append((session, owner))
    return owner


def remove(session: Session, owner: list[Session]) -> None:
    """Stop directing calls to ``session``, whichever thread stops it and in whatever
    order guards stop; the last one out puts every original back."""
    with _lock:
        for k, (running, where) in enumerate(_running):
            if running is session and where is owner:
                del _running[k]
                break
        else:
            return
        for k in range(len(owner) - 1, -1, -1):
            if owner[k] is session:
                del owner[k]
                break
        if not _running:
            _unpatch_tensorflow()


def uninstall() -> None:
    """Every guard removed and every original put back (records in progress are
    dropped): what the test suite calls after a test that left a guard on."""
    with _lock:
        for _session, owner in _running:
            owner.clear()
        _running.clear()
        _unpatch_tensorflow()


def _patch_tensorflow() -> None:
    """Wrap TensorFlow's gradient entry points (called under the lock, once)."""
    global _installation
    tf = sys.modules.get("tensorflow")
    if tf is None:
        from opregistry.model.readers.traced import import_tensorflow

        tf = import_tensorflow()
    _installation += 1
    from tensorflow.python.eager import backprop, record
    from tensorflow.python.ops import gradients_impl

    tape = backprop.GradientTape
    _patch(tape, "__enter__", _entering(tape.__enter__))
    _patch(tape, "__exit__", _exiting(tape.__exit__))
    _patch(tape, "stop_recording", _pausing(tape.stop_recording))
    _patch(tape, "gradient", _guarded(tape.gradient, "GradientTape.gradient", True))
    _patch(tape, "jacobian", _guarded(tape.jacobian, "GradientTape.jacobian", True))
    v2 = _guarded(gradients_impl.gradients_v2, "tf.gradients", False)
    v1 = _guarded(gradients_impl.gradients, "tf.compat.v1.gradients", False)
    for owner, name, wrapper in ((gradients_impl, "gradients_v2", v2),
                                 (gradients_impl, "gradients", v1), (tf, "gradients", v2),
                                 (tf.compat.v1, "gradients", v1)):
        _patch(owner, name, wrapper)
    _patch(record, "record_operation", _recording_custom(record.record_operation))


def _unpatch_tensorflow() -> None:
    """Every original back, and our op callback out of every thread that had it."""
    for (owner, name), original in _installed.items():
        setattr(owner, name, original)
    _installed.clear()
    for callbacks in _callback_lists:
        while _callback in callbacks:
            callbacks.remove(_callback)
    _callback_lists.clear()
    _state.callback_in = -1
    _state.logs.clear()
    _restore_execute()


def _restore_execute() -> None:
    """TF's ``execute.execute``, which adding an op callback switched, as it was
    (unless this thread has someone else's callback)."""
    global _original_execute
    if _original_execute is not None:
        from tensorflow.python.eager import context, execute

        if not context.context().op_callbacks:
            execute.execute = _original_execute
            _original_execute = None


def _patch(owner: object, name: str, wrapper: TFCallable) -> None:
    _installed[(owner, name)] = getattr(owner, name)
    setattr(owner, name, wrapper)


# ------------------------------------------------------------------- eager records


def _callback(op_type: str, inputs: Nest, attrs: tuple[Passed, ...], outputs: Nest,
              op_name: str | None = None, graph: Graph = None) -> None:
    """Op callback: an eager op run while a guarded tape records (graph ops have a
    creation traceback of their own)."""
    state = _state
    if graph is not None or state.busy or not state.logs or outputs is None:
        return None
    site = user_frame_site(2)
    for log in state.logs:
        if not log.paused:  # under tape.stop_recording(): not on that tape
            log.record(op_type, inputs, attrs, outputs, site)
    return None


def _start_callback() -> None:
    global _original_execute
    state = _thread_state()
    if state.callback_in == -1:
        from tensorflow.python.eager import context, execute
        from tensorflow.python.framework import op_callbacks

        with _lock:
            if _original_execute is None:
                _original_execute = execute.execute
            op_callbacks.add_op_callback(_callback)
            _callback_lists.append(context.context().op_callbacks)
            state.callback_in = _installation


def _stop_callback() -> None:
    state = _thread_state()
    if state.callback_in != -1 and not state.logs:
        from tensorflow.python.eager import context

        with _lock:  # not TF's remove_op_callback: it resets execute for every thread
            callbacks = context.context().op_callbacks
            while _callback in callbacks:
                callbacks.remove(_callback)
            _callback_lists[:] = [c for c in _callback_lists if c is not callbacks]
            if not _callback_lists:
                _restore_execute()
        state.callback_in = -1


def _entering(original: TFCallable) -> TFCallable:
    def __enter__(self: GradientTape) -> Passed:
        result = original(self)
        if session_here() is not None and not _state.busy and not _executing_eagerly():
            _open_span(self)
        elif session_here() is not None and not _state.busy:
            # a persistent tape entered again records on: so does its record
            log = getattr(self, _LOG_ATTR, None) or EagerLog()
            setattr(self, _LOG_ATTR, log)
            _thread_state().logs.append(log)
            _start_callback()
        return result

    return __enter__


def _exiting(original: TFCallable) -> TFCallable:
    def __exit__(self: GradientTape, *exc: Passed) -> Passed:
        _close_span(self)
        log = getattr(self, _LOG_ATTR, None)
        state = _thread_state()
        if log is not None and log in state.logs:
            state.logs.remove(log)
            _stop_callback()
        return original(self, *exc)

    return __exit__


def _pausing(original: TFCallable) -> TFCallable:
    """``tape.stop_recording()``: what runs inside is not on this tape, nor in its
    record (TF's own ``record.stop_recording`` around a tf.function's forward pass is
    not this: that call is recorded as one operation, which the record keeps)."""
    import contextlib

    @contextlib.contextmanager
    def stop_recording(self: GradientTape) -> Iterator[None]:
        log = getattr(self, _LOG_ATTR, None)
        paused = log.paused if log is not None else False
        if log is not None:
            log.paused = True
        spanned = _close_span(self)
        try:
            with original(self):
                yield
        finally:
            if log is not None:
                log.paused = paused
            if spanned:
                _open_span(self)

    return stop_recording


def _open_span(tape: GradientTape) -> None:
    from tensorflow.python.framework import ops

    graph = ops.get_default_graph()
    spans = getattr(tape, _SPANS_ATTR, None)
    if spans is None:
        spans = []
        setattr(tape, _SPANS_ATTR, spans)
    spans.append([graph, len(graph.get_operations()), None])


def _close_span(tape: GradientTape) -> bool:
    """Ends the tape's open stretch, if any; whether there was one."""
    spans = getattr(tape, _SPANS_ATTR, None)
    if spans and spans[-1][2] is None:
        spans[-1][2] = len(spans[-1][0].get_operations())
        return True
    return False


def _recording_custom(original: TFCallable) -> TFCallable:
    """``record.record_operation``, which an eager tf.custom_gradient calls with its
    gradient function: noted in the records, as the op callback cannot see it."""
    def record_operation(op_type: str, output_tensors: Nest, input_tensors: Nest,
                         backward_function: TFCallable, *args: Passed,
                         **kwargs: Passed) -> Passed:
        state = _thread_state()
        if state.logs and not state.busy and _executing_eagerly():
            for log in state.logs:
                if not log.paused:
                    log.record_custom(op_type, output_tensors, input_tensors,
                                      backward_function)
        return original(op_type, output_tensors, input_tensors, backward_function,
                        *args, **kwargs)

    return record_operation


def _executing_eagerly() -> bool:
    from tensorflow.python.eager import context

    return bool(context.executing_eagerly())


# ------------------------------------------------------------------ gradient calls


def _guarded(original: TFCallable, call: str, is_tape: bool) -> TFCallable:
    def gradient(*args: Passed, **kwargs: Passed) -> Passed:
        session = session_here()
        if session is None or _state.busy:
            return original(*args, **kwargs)
        site = call_site(2)
        if is_tape:
            tape, target, sources = _tape_args(args, kwargs)
            log = getattr(tape, _LOG_ATTR, None) or getattr(tape, _SPANS_ATTR, None)
        else:
            tape, log = None, None
            target = kwargs.get("ys", args[0] if args else None)
            sources = kwargs.get("xs", args[1] if len(args) > 1 else None)
        _state.busy = True
        try:
            # a gradient of a gradient taken under this tape: warned before TF raises
            warned = _inspect(session.before_gradient, target, sources, log, 3)
            try:
                result = original(*args, **kwargs)
            except LookupError as error:  # an op's gradient raised: say which, then
                # (TF's: LookupError; not KeyError/IndexError; once, if order 2 said it)
                if not isinstance(error, (KeyError, IndexError)) and not warned:
                    _inspect(session.inspect_raise, call, site, target, sources, None, log,
                             error)
                raise  # TF's own error, unchanged
            # an outer tape records this call: its second order is worth analysing
            nested = _recording()
            watched = tape.watched_variables() if tape is not None and nested else ()
            _inspect(session.inspect, call, site, target, sources, result, log, watched,
                     nested)
        finally:
            _state.busy = False
        return result

    gradient.__wrapped__ = original  # type: ignore[attr-defined]
    gradient.__doc__ = original.__doc__
    return gradient


def _recording() -> bool:
    """Whether a tape records what runs now (an outer tape around a gradient call)."""
    from tensorflow.python.eager import record

    return bool(record.could_possibly_record())


def _inspect(step: Callable[..., bool | None], *args: Passed) -> bool | None:
    """The analysis of one call (``step``: a session's ``inspect``, ``inspect_raise``
    or ``before_gradient``), and what it returns (None after a fault); a fault of the
    guard itself is one warning, never the end of the user's training
    (NonDifferentiableError is the policy's, and passes)."""
    from opregistry.guard.actions import NonDifferentiableError, NonDifferentiableWarning
    from opregistry.guard.second_order import SecondOrderWarning
    from opregistry.guard.xla import XlaCompileWarning

    session = step.__self__  # type: ignore[attr-defined]  # a bound method's session
    try:
        return step(*args)
    except NonDifferentiableError:
        if session.on_raise is not None:
            session.on_raise()
        raise
    except (NonDifferentiableWarning, XlaCompileWarning, SecondOrderWarning):  # our
        raise  # findings, which the program turned into errors (``-W error``)
    except Exception as exc:  # noqa: BLE001 - any fault in the analysis
        import warnings

        warnings.warn(f"opregistry.guard could not analyse a gradient call: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
        return None


def _tape_args(args: tuple[Passed, ...], kwargs: dict[str, Passed]
               ) -> tuple[GradientTape, Nest, Nest]:
    tape = args[0]
    target = kwargs.get("target", args[1] if len(args) > 1 else None)
    sources = kwargs.get("sources", args[2] if len(args) > 2 else None)
    return tape, target, sources
