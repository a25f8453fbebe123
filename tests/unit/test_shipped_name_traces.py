"""The shipped database's name traces (issue 39): every public ``tf.*`` name of every
TensorFlow release it holds was called as TensorFlow traces it (data/harvest_name_traces.py,
in that release's own environment), and the op ``lookup`` and ``explain`` give first for
each traced name is one TF built when it traced the name in that release. No
TensorFlow here: the traces are data; tests/test_python_name_traces.py traces the
installed release again and compares.

``python tests/unit/test_shipped_name_traces.py`` prints, per release, the names, how
many were traced, and for how many the trace, not the harvest's reading of the code,
decided the op shown first (the figures of docs/commands/lookup.md)."""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from opregistry.db.store import ReleaseRow, Store, using
from opregistry.registry.default_calls import GENERATED_CALL_DIFFERS
from opregistry.registry.resolve import NameIndex

# at least this share of a release's names is traced (what the tracer reached on the
# release it reaches least, rounded down): fewer means a release's traces broke
TRACED_SHARE = 0.6


def release_names(store: Store) -> dict[int, list[str]]:
    """Each TensorFlow release's public ``tf.*`` names (``tf.raw_ops.*`` are op names)."""
    return {release.id: store.public_names(release.id) for release in store.core_releases()}


def judged(store: Store, release: ReleaseRow, names: list[str]
           ) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, str]]]:
    """(each name's trace, each traced name's (first op, how it was found))."""
    traces = {t["name"]: t for t in store.name_traces(release.id, names)}
    index = NameIndex(store, names, release)
    first: dict[str, tuple[str, str]] = {}
    for name, trace in traces.items():
        if trace["family"]:
            found = index.resolve(name)
            assert found is not None and found.how is not None, name
            first[name] = (found.pairs[0][0], found.how.by)
    return traces, first


@pytest.fixture(scope="module")
def shipped() -> list[tuple[ReleaseRow, list[str], dict[str, Any], dict[str, Any]]]:
    with using(None) as store:
        names = release_names(store)
        return [(release, names[release.id], *judged(store, release, names[release.id]))
                for release in store.core_releases() if release.id in names]


def test_every_release_has_a_trace_of_each_public_name(shipped):
    assert len(shipped) >= 26  # 25 releases and the nightly
    for release, names, traces, first in shipped:
        assert sorted(traces) == names, release.version
        assert len(first) >= TRACED_SHARE * len(names), (release.version, len(first))
        untraced = {t["why"] for t in traces.values() if not t["family"]}
        assert None not in untraced and "" not in untraced, release.version


# names users call, each a v2 function handing its call to its v1 twin: the harvest's
# reading of the code missed them (2.0-2.12 one part, 2.13+ all) until names.py's
# ``_twins`` (data/harvest_name_traces.py --python-names read every release again)
EVERY_TF2_RELEASE_HAS = {"tf.map_fn", "tf.scan", "tf.foldl", "tf.foldr", "tf.while_loop",
                         "tf.nn.embedding_lookup", "tf.nn.embedding_lookup_sparse",
                         "tf.debugging.assert_positive"}


def test_every_tf2_release_has_the_names_a_v1_twin_once_hid(shipped):
    for release, names, traces, first in shipped:
        if not release.version.startswith("1."):
            assert EVERY_TF2_RELEASE_HAS <= set(names), (
                release.version, EVERY_TF2_RELEASE_HAS - set(names))
            for name in ("tf.map_fn", "tf.scan", "tf.foldl", "tf.nn.embedding_lookup"):
                assert name in first, (release.version, name)  # traced: TF built its ops


def test_the_op_shown_first_is_one_tf_built_for_every_traced_name_of_every_release(shipped):
    wrong = {}
    for release, _, traces, first in shipped:
        for name, (op, _) in first.items():
            if op not in traces[name]["ops"].split() and name not in GENERATED_CALL_DIFFERS:
                wrong[(release.version, name)] = (op, traces[name]["ops"])
    assert not wrong, sorted(wrong.items())[:20]


if __name__ == "__main__":  # the figures: python tests/unit/test_shipped_name_traces.py
    with using(None) as store:
        by_release = release_names(store)
        for release in store.core_releases():
            names = by_release.get(release.id, [])
            traces, first = judged(store, release, names)
            how = Counter(by for _, by in first.values())
            print(f"{release.version:20} {len(names):5} names, {len(first):5} traced, "
                  f"{how['trace']:4} decided by the trace")
