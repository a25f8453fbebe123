"""The fuzz harness (tests/fuzz) in CI: 4,000 mutated model files through the static
readers and the analysis, each checked in a fork with a 10 s and 2 GiB limit and its
peak RSS under the README's bound; 1,000 of them through the command line's own main()
as well, and the special paths through a freshly exec'd `opregistry check`.

Seeds are real models written by TensorFlow in a subprocess, once per session. The
inputs are those of run seed 0: input N is the same file on every machine (replay one
with ``python -m tests.fuzz --replay N``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.fuzz is imported as a package of the repository
    sys.path.insert(0, str(ROOT))

from tests.fuzz import server  # noqa: E402
from tests.fuzz.__main__ import build_seeds, report  # noqa: E402
from tests.fuzz.cases import Case  # noqa: E402

pytestmark = pytest.mark.fuzz  # CI-sized: CI runs it, a developer may skip it

INPUTS = 4_000  # the figure the README states
CLI_INPUTS = 1_000


@pytest.fixture(scope="session")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_seeds(tmp_path_factory.mktemp("fuzz-seeds"))


@pytest.fixture(scope="session")
def api_outcomes(seeds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
                 ) -> list[server.Outcome]:
    return server.run(seeds, INPUTS, tmp_path_factory.mktemp("fuzz-work"), seed=0)


def _explain(summary: server.Summary) -> str:
    from io import StringIO

    out = StringIO()
    report(summary, 0, out)
    return out.getvalue()


def test_every_input_without_failure_and_memory_bounded(api_outcomes):
    summary = server.summarise(api_outcomes)
    print(_explain(summary))
    assert summary.inputs == INPUTS, "the run stopped early"
    assert not summary.failures, _explain(summary)
    assert summary.worst_ratio <= 1, _explain(summary)  # peak RSS within the bound
    # the mutations reach every outcome: readers refusing, analysis finding, clean
    assert {"clean", "findings", "model_error"} <= set(summary.by_class), summary.by_class
    # and the hostile shapes of issue 21: deep and wide object graphs, sparse files
    labels = " ".join(label for o in api_outcomes for label in o.labels)
    for family in ("object chain 100000", "object chain 201", "object width 200000",
                   "of variables", "sparse"):
        assert family in labels, family


def test_the_command_line_says_the_same_in_one_line(seeds, api_outcomes, tmp_path):
    """The first 1,000 inputs through the command line (its main() in the fork, argv as
    typed): exit 0, 1 or 2 with exactly one `Error:` line, never a traceback, and the
    class the API gave."""
    outcomes = server.run(seeds, CLI_INPUTS, tmp_path, seed=0,
                          limits=server.Limits(mode="cli"))
    summary = server.summarise(outcomes)
    assert summary.inputs == CLI_INPUTS and not summary.failures, _explain(summary)
    differ = [(o.index, o.outcome, a.outcome) for o, a in zip(outcomes, api_outcomes)
              if o.outcome != a.outcome]
    assert not differ, differ


SPECIAL = ["fifo", "/dev/zero", "/dev/urandom", "sparse", "sparse_valid_first", "long",
           "empty_dir", "/proc/self/mem"]


def _special(tmp_path: Path, name: str) -> Path:
    if name == "fifo":
        os.mkfifo(tmp_path / "fifo.pb")
        return tmp_path / "fifo.pb"
    if name.startswith("sparse"):
        folder = tmp_path / name
        folder.mkdir()
        # a valid first field (issue 21: read, and doubled, before it was refused)
        head = b"\x0a\x00" if name == "sparse_valid_first" else b""
        with open(folder / "saved_model.pb", "wb") as file:
            file.write(head)
            file.truncate(2 ** 31 - 1)
        return folder
    if name == "long":
        return tmp_path / ("x" * 300)
    if name == "empty_dir":
        (tmp_path / "d").mkdir()
        return tmp_path / "d"
    return Path(name)


def test_special_paths_through_the_command_line(tmp_path):
    """Each through a freshly exec'd `opregistry check` (the checking processes spawned
    once, not once per path)."""
    work = [(_special(tmp_path, name), tmp_path / f"result{k}", server.Limits(mode="exec"),
             Case(k, name)) for k, name in enumerate(SPECIAL)]
    for outcome in server.run_clean_all(work):
        assert outcome.outcome == "model_error", outcome
        assert outcome.rss_kb < 200 * 1024, outcome  # refused before reading


def test_the_harness_sees_hangs_and_memory(seeds, tmp_path):
    """The limits are real: a check given no time is a hang, one given no memory a
    failure (so a pass above means something)."""
    target = next(iter(seeds.values()))
    hang, memory = server.run_clean_all([
        (target, tmp_path / "r1", server.Limits(seconds=0.001), Case(0, "x")),
        (target, tmp_path / "r2", server.Limits(address_space=1 << 20), Case(0, "x"))])
    assert hang.outcome == "failure" and hang.detail.startswith("hang"), hang
    assert memory.outcome == "failure", memory
