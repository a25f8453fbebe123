"""The random-program differential in CI: a fixed-seed batch of generated programs
(tests/programs.py), every verdict of ``check`` (both save paths), the guard (eager and
traced) and gradcheck compared with TensorFlow's (tests/random_differential.py).

Programs 0-59 here, in the developer tier (every family and every op of concern at
least once); programs 60-299 in tests/test_random_differential_ci.py, marked ``fuzz``
(CI runs both: the 300 programs of docs/measurements.md). Two files, so that xdist can
give the two slices to two workers: the 300 took one worker 11 minutes.

One test per (part, family): a disagreement fails the cell of the program's family.
KNOWN lists the cells that disagree because of bugs other branches fix (none today);
each is an expected failure, strict (it fails once fixed: remove the entry then), and
only for the named kinds of disagreement: any other kind in the same cell fails the
test outright.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import programs
import pytest
import random_differential as rd

PROGRAMS = range(0, 60)  # the seeds judged here
GRADCHECK_EVERY = 3  # gradcheck is most of the time: every third program (100 of 300)

# (part, family) -> (kinds of disagreement, why): none since the 300-program run of
# docs/measurements.md (the fused batch norm's batch mean: per-output facts; the
# while-loop oracle: iteration counts; gradcheck: the batch mean's template is a
# gradient that is not the derivative, zeros by value told from by fact). A cell that
# disagrees because of a bug another branch fixes goes here, with its kinds.
KNOWN: dict[tuple[str, str], tuple[frozenset[str], str]] = {}


class KnownDisagreement(Exception):
    """Only this failure is expected of a KNOWN cell."""


@pytest.fixture(scope="module")
def batch() -> range:
    """The seeds this file judges (tests/test_random_differential_ci.py: the others)."""
    return PROGRAMS


@pytest.fixture(scope="module")
def report(batch: range, tmp_path_factory: pytest.TempPathFactory,
           harvested_db: Path) -> rd.Report:
    """The batch judged with the facts of this session's own harvest of the installed
    TensorFlow (what the harvester finds today, per-output facts too), not the shipped
    database's (harvested with an earlier harvester). Gradcheck on every
    GRADCHECK_EVERY-th program from the batch's first (a multiple of it: the same
    programs as one batch of 300)."""
    assert batch.start % GRADCHECK_EVERY == 0
    return rd.run(len(batch), batch.start, tmp_path_factory.mktemp("programs"),
                  GRADCHECK_EVERY, db=harvested_db)


def _cells() -> list[object]:
    cells: list[object] = []
    for part in rd.PARTS:
        for family in programs.FAMILIES:
            known = KNOWN.get((part, family))
            marks = [pytest.mark.xfail(strict=True, raises=KnownDisagreement,
                                       reason=known[1])] if known else []
            cells.append(pytest.param(part, family, marks=marks, id=f"{part}-{family}"))
    return cells


@pytest.mark.parametrize(("part", "family"), _cells())
def test_agrees_with_tensorflow(report: rd.Report, part: str, family: str) -> None:
    found = report.cell(part, family)
    known = KNOWN.get((part, family))
    if known is not None:
        other = [d for d in found if d.kind not in known[0]]
        assert not other, "\n\n".join(rd.reproduce(report, d) for d in other[:3])
        if found:
            raise KnownDisagreement(f"{len(found)} known: " + "; ".join(
                d.text() for d in found[:5]))
    assert not found, "\n\n".join(rd.reproduce(report, d) for d in found[:3])


def test_batch_size_and_pairs(report: rd.Report, batch: range) -> None:
    """Sized by count: every program judged by every part (gradcheck on a third)."""
    assert [p.seed for p in report.programs] == list(batch)
    raised = sum(d.kind == "gradcheck raises" for d in report.disagreements)
    assert report.gradchecked + raised == len(range(0, len(batch), GRADCHECK_EVERY))
    for part in rd.PARTS:
        assert report.pairs[part] > len(batch), (part, report.pairs[part])
    print("\n" + rd.render(report))


def test_every_family_and_op_is_covered(report: rd.Report, batch: range) -> None:
    """Each family is the first statement of len(batch) / len(FAMILIES) programs at
    least, and every op of concern a template names is in the database's 2.21 release
    with such a status and in the saved graphs of some program of the batch."""
    built_on = {f: sum(p.family == f for p in report.programs) for f in programs.FAMILIES}
    assert min(built_on.values()) >= len(batch) // len(programs.FAMILIES) >= 1, built_on
    assert rd.coverage(report) == len(programs.FAMILIES) == len(set(programs.FAMILIES))
    assert f"families of concern covered: {len(programs.FAMILIES)} of " in rd.render(report)
    named = {op for t in programs.CONCERNS + programs.SMOOTH for op in t.ops}
    of_concern = named & set(report.concern_ops)
    assert len(of_concern) >= 25, sorted(named - set(report.concern_ops))
    missed = sorted(op for op in of_concern if not report.op_programs[op])
    assert not missed, missed


# --------------------------------------------------- the comparison can fail


def test_planted_check_verdict_is_caught(report: rd.Report) -> None:
    """A blocked target moved to with_gradient in a real check result: a disagreement."""
    program, part, path, result, answers = next(
        run for run in report.check_runs if any(o.blocked for o in run[3].outputs))
    assert not rd.judge_check(program, part, path, result, answers)[1]
    outputs = []
    planted = ""
    for o in result.outputs:
        if o.blocked and not planted:
            planted = o.blocked[0]
            o = dataclasses.replace(o, blocked=o.blocked[1:],
                                    with_gradient=o.with_gradient + [planted])
        outputs.append(o)
    wrong = dataclasses.replace(result, outputs=outputs)
    found = rd.judge_check(program, part, path, wrong, answers)[1]
    assert found and all(planted in d.detail for d in found), [d.detail for d in found]


@pytest.mark.parametrize("planted", ["false alarm", "miss"])
def test_planted_guard_verdict_is_caught(report: rd.Report, planted: str) -> None:
    """The guard's real report with one name added (a false alarm) or one removed (a
    miss): a disagreement each."""
    runs = [r for r in report.guard_runs if not rd.judge_guard(*r)]
    if planted == "false alarm":
        program, part, output, names, given, other, reported = next(
            r for r in runs if "gradient" in r[4])
        name = names[given.index("gradient")]
        reported = {**reported, name: "zero"}
    else:
        program, part, output, names, given, other, reported = next(
            r for r in runs if r[6])
        name = next(iter(reported))
        reported = {k: v for k, v in reported.items() if k != name}
    found = rd.judge_guard(program, part, output, names, given, other, reported)
    assert [d.detail.split(":")[0] for d in found] == [f"{output} {name}"]


def test_planted_guard_silence_where_tensorflow_raises_is_caught(report: rd.Report) -> None:
    """The batch has calls where TF raises (an op's gradient has no entry), eagerly and
    traced, and the guard's real report there with its ``raises`` loss taken out (it
    said nothing before TF's error) is a disagreement."""
    assert report.tf_raises["guard-eager"] and report.tf_raises["guard-traced"], \
        report.tf_raises
    program, part, output, guard, error = next(
        r for r in report.guard_raise_runs if not rd.judge_guard_raise(*r))
    silent = SimpleNamespace(lost=[lost for lost in guard.lost if lost.kind != "raises"])
    found = rd.judge_guard_raise(program, part, output, silent, error)
    assert [d.kind for d in found] == ["guard silent where TF raises"], found


def test_the_guard_beside_an_output_where_tensorflow_raises(tmp_path: Path,
                                                           harvested_db: Path) -> None:
    """Several outputs of which only one reaches an op whose gradient TF has no entry
    for: program 16 (``tf.unique`` of a variable) with a second output that does not
    reach it (programs 0-59 hold none: where one has several outputs, the others reach
    an op that raises too, PreventGradient in program 94). Judged as the differential judges
    the guard, TF deciding: TF raises differentiating ``out0``, eagerly and traced, and
    the guard says so first, naming Unique; TF differentiates ``out1``, and the guard
    reports no raise there. A raise planted in that report is a disagreement."""
    import tensorflow as tf

    base = programs.generate(16)
    beside = programs.T("smooth", "tf.sin(v0) * x1", concern=False)
    program = dataclasses.replace(
        base, statements=[*base.statements, ("t2", beside)],
        outputs={**base.outputs, "out1": "t2"},
        depends={**base.depends, "t2": {"v0", "x1"}})
    report = rd.Report(concern_ops=rd.concern_ops(harvested_db))
    module = rd.load(program, tmp_path).build_module()
    rd.compare_guard(tf, report, program, module, rd.points(tf, program), harvested_db)
    assert not report.disagreements, [d.text() for d in report.disagreements]
    assert {(r[1], r[2]) for r in report.guard_raise_runs} == {
        ("guard-eager", "out0"), ("guard-traced", "out0")}
    runs = {(r[1], r[2]): r for r in report.guard_runs}
    assert set(runs) == {("guard-eager", "out1"), ("guard-traced", "out1")}
    for prog, part, output, names, given, other, reported in runs.values():
        planted = {**reported, rd.WHOLE_CALL: "raises"}
        found = rd.judge_guard(prog, part, output, names, given, other, planted)
        assert [d.kind for d in found] == ["TF differentiates, guard raises"], found


def test_planted_gradcheck_verdict_is_caught(report: rd.Report) -> None:
    """A gradcheck ``none`` turned ``ok``, and an ``ok`` turned ``unrelated``."""
    program, checks, truth = next(
        r for r in report.gradcheck_runs if not rd.judge_gradcheck(*r)[1]
        and {c.verdict for c in r[1]} >= {"none", "ok"})
    for before, after in (("none", "ok"), ("ok", "unrelated")):
        index = next(i for i, c in enumerate(checks) if c.verdict == before)
        wrong = list(checks)
        wrong[index] = dataclasses.replace(checks[index], verdict=after)
        found = rd.judge_gradcheck(program, wrong, truth)[1]
        assert [d.kind.split(", ")[1] for d in found] == [f"gradcheck {after}"]


def test_a_program_is_reproduced_from_its_seed(tmp_path: Path) -> None:
    """The seed alone gives the same source; the source runs."""
    source = programs.generate(41).source()
    assert source == programs.generate(41).source()
    assert source != programs.generate(42).source()
    namespace: dict[str, object] = {}
    exec(compile(source, "program_41.py", "exec"), namespace)  # noqa: S102 - our own code
    assert set(namespace["build_module"]().__call__(  # type: ignore[operator]
        *[[[0.1, 0.2, 0.3]] * 2] * len(programs.generate(41).inputs)))


# ------------------------------------------- the oracle: identically zero by fact

# body of (v, w) -> (whether TF's gradient for v is zero by fact, whether all zero)
ZERO_CASES = {
    "custom_zeros": ("zero_grad(v) * w", True, True),
    "sign": ("tf.sign(v) * w", True, True),
    "cancels": ("v * w - v * w", False, True),  # zeros by value: t0 - t0
    "mask_fixed_by_w": ("tf.where(w > 5.0, v, w)", False, True),  # zeros by value
    "maximum": ("tf.maximum(v, w) + tf.round(v)", False, False),  # zeros in places
    # traced only (eagerly a loop is unrolled, and Round gives None): a loop that
    # always runs (twice) and rounds: its path of zero iterations, which would pass
    # the upstream, is not taken; TF's While ran twice (its counter says so)
    "while_rounds": ("tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.round(h)), "
                     "[tf.constant(0), v * w])[1]", True, True),
    "while_never_runs": ("tf.while_loop(lambda i, h: i < 0, lambda i, h: (i + 1, "
                         "tf.round(h)), [tf.constant(0), v * w])[1]", False, False),
}


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_by_fact_zero_reads_the_gradient_graph(traced: bool) -> None:
    """The harness's 'identically zero' is by fact: TF's gradient graph for the call
    does not read the upstream gradient; zeros that come from values are not."""
    import tensorflow as tf

    namespace: dict[str, object] = {"tf": tf}
    exec(programs.HELPERS["zero_grad"], namespace)  # noqa: S102 - our own code
    v = tf.Variable([[0.3, -0.2, 0.9]])
    w = tf.Variable([[0.5, 0.1, -0.4]])
    for name, (body, expected, all_zero) in ZERO_CASES.items():
        if name.startswith("while") and not traced:
            continue
        compute = eval(f"lambda v, w: {body}", namespace)  # noqa: S307 - our own code

        def grads(upstream: object, compute: object = compute) -> list[object]:
            with tf.GradientTape() as tape:
                value = compute(v, w)  # type: ignore[operator]
            return tape.gradient(value, [v], output_gradients=tf.identity(
                upstream, name="upstream"))

        if traced:
            concrete = tf.function(grads).get_concrete_function(
                tf.TensorSpec([1, 3], tf.float32))
        else:
            with tf.GradientTape(persistent=True) as tape:
                value = compute(v, w)
            concrete = tf.function(lambda upstream: tape.gradient(
                value, [v], output_gradients=upstream)).get_concrete_function(
                tf.TensorSpec([1, 3], tf.float32, name="upstream"))
        given = tf.convert_to_tensor(concrete(tf.ones([1, 3]))[0]).numpy()
        assert rd.by_fact_zero(tf, concrete, [tf.ones([1, 3])]) == [expected], name
        assert (given == 0).all() == all_zero, (name, given)


def test_the_guard_missing_a_zero_by_fact_is_caught(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A mutation: the guard never says 'identically zero'. On a program whose custom
    gradient returns zeros_like(dy) the differential then finds the miss, eagerly and
    traced; with the guard as it is, nothing."""
    import tensorflow as tf

    from opregistry.guard import session

    program = programs.generate(29)  # out0 = reduce_sum(zero_grad(x0) + v2)
    assert program.family == "custom_gradient_zero"
    module = rd.load(program, tmp_path).build_module()
    at = rd.points(tf, program)
    report = rd.Report()
    rd.compare_guard(tf, report, program, module, at)
    assert not report.disagreements, [d.text() for d in report.disagreements]
    kept = session.Session._lost

    def never_zero(self: object, *args: object, **kwargs: object) -> object:
        lost = kept(self, *args, **kwargs)  # type: ignore[arg-type]
        return None if lost is not None and lost.kind == "zero" else lost

    monkeypatch.setattr(session.Session, "_lost", never_zero)
    broken = rd.Report()
    rd.compare_guard(tf, broken, program, module, at)
    assert {(d.part, d.kind, d.detail.split(":")[0]) for d in broken.disagreements} == {
        (part, "TF identically zero, guard silent", "out0 x0")
        for part in ("guard-eager", "guard-traced")}


def test_a_case_predicate_is_no_data_path_for_gradcheck_either(tmp_path: Path,
                                                               harvested_db: Path) -> None:
    """Issue 22, seed 98 with ``--gradcheck-every 1``: ``x1`` reaches the outputs only
    through ``tf.case``'s predicates. TF gives None for it; ``check`` and gradcheck say
    ``unrelated`` (a predicate is not followed: the output is locally constant in it),
    and the oracle, which counted ``case_predicates``' predicate operand as a data path
    (unlike ``cond`` and ``case``), called that a disagreement."""
    import tensorflow as tf

    program = programs.generate(98)
    assert program.family == "case_predicates"
    assert "x1" in program.statements[0][1].code  # in the predicates only
    module = rd.load(program, tmp_path).build_module()
    at = rd.points(tf, program)
    report = rd.Report()
    rd.compare_gradcheck(tf, report, program, module, at, harvested_db)
    assert report.gradchecked == 1 and report.pairs["gradcheck"] == 12
    assert not report.disagreements, [d.text() for d in report.disagreements]
    _, checks, truth = report.gradcheck_runs[0]
    verdicts = {(c.output, c.target): c.verdict for c in checks}
    for output in program.outputs:
        assert truth[(output, "x1")] == "none"  # TF: None (zeros through the call)
        assert verdicts[(output, "x1")] == "unrelated"
