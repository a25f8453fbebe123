"""Every public Python name the tool accepts, called as TensorFlow traces it: the op
``lookup`` and ``explain`` give first for the name is one the call really builds.

The names are the installed release's (the shipped database's ``tf.*`` names of TF
2.21.0: 2,185, without ``tf.raw_ops.*``, which are op names). One child process
(``runner.trace_names``, the harvester's opregistry/harvest/inenv/name_traces.py: it
calls arbitrary public functions, some of which change TF's global state) calls each
function once (aliases share it) with arguments generated from its signature by
parameter name (opregistry/harvest/inenv/name_arguments.py: tensors, sparse
tensors, resource variables, strings, sampled classes, integer labels of logits,
callables, windows and sizes; lists and sparse tensors where the docstring says so),
in families of shapes and dtypes (float, complex, int, bool, string and quantized;
rank 0 to 5; lists of tensors), seeded per function, and records every op of the
traced graph and of its functions (cond and loop bodies), less those only the
generated callables built (a body's, a map's fn's, an RNN cell's). 1,787 names build
an op that way (1,155 before the structured arguments and the families after the seventh,
1,697 before loops, map_fn and folds over lists, switch_case, batch_normalization,
conv1d, strided_slice, reverse, crop_and_resize, sequence masks, the inverse STFT and
more of TF 1's twin parameters; 1,771 before the harvest read ``tf.map_fn``, the
folds, ``tf.nn.embedding_lookup`` and ten more names it had missed; 1,784 before the
generated RNN cell). The other 398 cannot be called with generated
arguments: 117 are not functions of this installation (generated wrappers of ops that modules the harvest
imported had loaded: ``tf.compat.v1.xla_*``, ``rpc_*``; a class), 91 are never called
(``tf.config``, ``tf.summary``, ``tf.data``, ``tf.keras``, ``tf.train``,
``enable_*``...: they change the process, touch files, or need a writer or a
cluster), 76 take a parameter no generator makes (a raw_rnn's loop_fn, a variable list, a
protobuf's field names, an index to shuffle...), 48 refuse every family of generated
arguments (shapes or dtypes they do not take together, or a call TF refuses to trace:
NumPy methods on a tensor, a variable made from a traced value), and 66 build nothing
but plumbing with them (a cast to the same dtype, a static shape, a check TF decides
statically). ``python tests/test_python_name_traces.py`` prints these counts.

``lookup`` and ``explain`` check each name against the shipped database's traces of
the release (data/harvest_name_traces.py runs the same tracer in every release's
venv): the first op is one the traced call built. Those traces are this tracer's
today (a test here), and the resolution without them, from the harvest's reading of
the code, ``default_calls.py`` (the ops a call builds where the harvest cannot tell:
tf.norm -> Sqrt, not Svd; tf.signal.rfft -> RFFT, not Pad;
tf.compat.v1.scatter_update -> ResourceScatterUpdate, on TF 2's variables) and
``names.HELPER_OPS`` / ``names.newest_first`` (TF 1's Enter/Exit and reference
variables last; AddV2 before Add), is wrong only for ``DECIDED_BY_THE_TRACE`` (loops,
switch_case, getitem...): what a release harvested without traces would say.
``EXCEPTIONS`` holds the few names whose generated call is not their usual one. Cost:
one TF import and about 15 CPU seconds of tracing, in the child; about 25 CPU seconds
for the file.
"""
from __future__ import annotations

import sys
from collections import Counter
from importlib.metadata import version

import pytest

from opregistry.db.store import using
from opregistry.errors import OpregistryError
from opregistry.harvest.runner import NameTrace, collect, trace_names
from opregistry.registry.default_calls import GENERATED_CALL_DIFFERS
from opregistry.registry.names import DEFAULT_CALLS
from opregistry.registry.resolve import NameIndex

# names whose generated call (the required arguments only) builds another form than
# the usual one: the op they lead to first is the usual call's, tested by hand
EXCEPTIONS = {
    # tf.where(c) alone is Where; tf.where(c, x, y), the form on a gradient path, is
    # SelectV2 (tests/test_python_name_calls.py calls it so)
    "tf.where": "Where",
    "tf.compat.v1.where_v2": "Where",
    "tf.compat.v1.where": "Where",  # where(c, x, y): Select
}
# names whose first op by the harvest's reading of their code (and default_calls) alone
# is not one their call builds: the release's traces decide them (``lookup``/``explain``
# with the shipped traces; tests/unit/test_shipped_name_traces.py counts them per
# release) (name: an op the call builds)
DECIDED_BY_THE_TRACE = {
    "tf.while_loop": "StatelessWhile", "tf.compat.v1.while_loop": "StatelessWhile",
    "tf.switch_case": "StatelessCase", "tf.compat.v1.switch_case": "StatelessCase",
    "tf.__operators__.getitem": "StridedSlice",
    "tf.signal.inverse_stft": "IRFFT", "tf.compat.v1.signal.inverse_stft": "IRFFT",
    "tf.ragged.row_splits_to_segment_ids": "Range",
    "tf.compat.v1.ragged.row_splits_to_segment_ids": "Range",
    "tf.experimental.numpy.concatenate": "ConcatV2",
    "tf.experimental.numpy.swapaxes": "Transpose",
    # an RNN around the generated cell: its loop; the concatenation of both directions
    "tf.compat.v1.nn.dynamic_rnn": "StatelessWhile",
    "tf.compat.v1.nn.static_bidirectional_rnn": "ConcatV2",
}
# names the generator calls today (1,787): fewer means a generator or a family broke
CALLED_AT_LEAST = 1745


def release_names() -> list[str]:
    """The installed TensorFlow's public ``tf.*`` names in the shipped database."""
    with using(None) as store:
        try:
            return store.public_names(store.release(version("tensorflow")).id)
        except OpregistryError:  # not a release of the shipped database
            return []


def traced(names: list[str]) -> dict[str, NameTrace]:
    """Each name's trace by the harvester's child process, under this interpreter."""
    return trace_names(sys.executable, names)


@pytest.fixture(scope="module")
def traces() -> dict[str, NameTrace]:
    names = release_names()
    if not names:
        pytest.skip(f"the shipped database has no TensorFlow {version('tensorflow')}")
    return traced(names)


def counts(traces: dict[str, NameTrace]) -> Counter[str]:
    """How many names were traced, per family, and why the others were not (the
    figures of this docstring and of docs/commands/lookup.md)."""
    return Counter(f"traced ({t['family']})" if t["family"] else
                   t["why"].split(" (")[0].split(" for parameter")[0]
                   for t in traces.values())


def first_ops(names: list[str], traced: bool = True) -> dict[str, list[str]]:
    """The ops ``lookup``/``explain`` give for each name, in their order: checked
    against the shipped traces of the installed release (``traced``), or as the harvest
    and default_calls alone say."""
    with using(None) as store:
        index = NameIndex(store, names, store.release(version("tensorflow")) if traced
                          else None)
        resolved = {name: index.resolve(name) for name in names}
    return {name: [op for op, _ in found[1]] for name, found in resolved.items() if found}


def test_every_called_name_leads_first_to_an_op_its_call_builds(
        traces: dict[str, NameTrace]) -> None:
    called = {name: set(t["ops"]) for name, t in traces.items() if t["family"]}
    assert len(called) >= CALLED_AT_LEAST, len(called)
    assert set(EXCEPTIONS) == GENERATED_CALL_DIFFERS  # the resolution's own list
    for traced in (True, False):
        ours = first_ops(sorted(called), traced)
        assert set(called) <= set(ours)  # every name of the release resolves
        wrong = {name: (ours[name][:4], sorted(ops)) for name, ops in called.items()
                 if ours[name][0] not in ops and name not in EXCEPTIONS
                 and (traced or name not in DECIDED_BY_THE_TRACE)}
        assert not wrong, "\n".join(f"{n}: we say {o}, TF builds {t}" for n, (o, t) in
                                    sorted(wrong.items()))
        for name, built in EXCEPTIONS.items():  # still so, else the entry goes
            assert name in called and ours[name][0] not in called[name], name
            assert built in called[name] and built in ours[name], (name, ours[name])
    for name, built in DECIDED_BY_THE_TRACE.items():  # the harvest alone: still wrong
        assert built in called[name] and ours[name][0] not in called[name], name


def test_the_shipped_traces_of_the_installed_release_are_what_tf_traces_now(
        traces: dict[str, NameTrace]) -> None:
    """The shipped database's traces of this release (data/harvest_name_traces.py) are
    the tracer's today: a change to the generators needs the traces harvested again."""
    with using(None) as store:
        release = store.release(version("tensorflow"))
        shipped = {row["name"]: (row["family"], row["ops"], row["why"])
                   for row in store.name_traces(release.id, list(traces))}
    now = {name: (t["family"], " ".join(sorted(set(t.get("ops") or ()))),
                  None if t["family"] else t.get("why")) for name, t in traces.items()}
    changed = {name: (shipped.get(name), found) for name, found in now.items()
               if shipped.get(name) != found}
    assert not changed, sorted(changed.items())[:10]


def test_a_call_s_ops_are_its_own_not_those_of_the_callables_it_runs(
        traces: dict[str, NameTrace]) -> None:
    """A loop's body, a map's fn, a branch, a sampler, an RNN cell are the user's code:
    the ops they build are left out of the trace (name_arguments.recorded), so the
    function's own ops remain (its loop, its list plumbing), whatever the user runs."""
    def ops(name: str) -> set[str]:
        assert traces[name]["family"], traces[name]
        return set(traces[name]["ops"])

    assert ops("tf.while_loop") == {"AddV2", "StatelessWhile"}  # the body's Mul, cond's Less
    assert ops("tf.cond") == {"Identity", "StatelessIf"}  # the branches' Mul
    assert "StatelessWhile" in ops("tf.map_fn") and "Mul" not in ops("tf.map_fn")
    assert "RandomUniform" not in ops("tf.nn.experimental.general_dropout")
    # an RNN cell (name_arguments.RnnCell): its MatMul and Tanh are not the RNN's
    rnn = ops("tf.compat.v1.nn.dynamic_rnn")
    assert "StatelessWhile" in rnn and not rnn & {"MatMul", "Tanh"}
    # static_rnn builds nothing of its own around the cell it calls
    assert traces["tf.compat.v1.nn.static_rnn"] == {"family": None,
                                                     "why": "builds only plumbing"}


# public names the harvest's reading of the code once missed in 2.x, each a v2 function
# that hands its call to its v1 twin (map_fn_v2 -> map_fn: the twin's helpers fell past
# the depth the reading follows), found since (names.py's ``_twins``)
ONCE_MISSED = {"tf.map_fn", "tf.scan", "tf.foldl", "tf.foldr", "tf.nn.embedding_lookup",
               "tf.nn.embedding_lookup_sparse", "tf.debugging.assert_positive"}


def test_the_shipped_python_names_of_the_installed_release_are_what_the_harvest_reads_now(
        ) -> None:
    """The shipped database's public names of this release are what the harvester reads
    from its code today (``runner.collect``, no probes): a change to the reading needs
    the names harvested again (data/harvest_name_traces.py --python-names)."""
    names = release_names()
    if not names:
        pytest.skip(f"the shipped database has no TensorFlow {version('tensorflow')}")
    now = {(e["name"], e["op"], e["method"])
           for e in collect(sys.executable, probes=False)["python_names"]}
    with using(None) as store:
        release = store.release(version("tensorflow")).id
        shipped = {(r["name"], r["op_name"], r["method"])
                   for r in store.release_python_names() if r["release_id"] == release}
    assert now == shipped, (sorted(now - shipped)[:10], sorted(shipped - now)[:10])
    assert ONCE_MISSED <= set(names)


def test_each_default_call_is_traced_or_called_by_hand(
        traces: dict[str, NameTrace]) -> None:
    """An entry of ``DEFAULT_CALLS`` is checked against TF: by this generator, or by
    tests/test_python_name_calls.py's hand-written calls, or it is a name of another
    release only."""
    from test_python_name_calls import CALLS

    unchecked = [name for name in DEFAULT_CALLS
                 if name in traces and not traces[name]["family"] and name not in CALLS]
    assert not unchecked, unchecked


if __name__ == "__main__":  # the counts: python tests/test_python_name_traces.py
    found = counts(traced(release_names()))
    print(f"{sum(found.values())} names, "
          f"{sum(n for k, n in found.items() if k.startswith('traced'))} traced")
    for reason, number in found.most_common():
        print(f"{number:5}  {reason}")
