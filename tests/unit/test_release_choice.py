"""One default-release rule (``registry.release_choice``) for every command and the API:
asked for, that release; else nearest to the installed TensorFlow; else the newest. The
shipped database holds 2.15.1, not 2.15.0: with TF 2.15.0 installed, 2.15.1's facts."""
from __future__ import annotations

import functools
import warnings

import pytest

from opregistry.db.location import shipped_database_path
from opregistry.errors import DatabaseError, UnknownReleaseError
from opregistry.registry.release_choice import (
    ChosenRelease,
    ReleaseWarning,
    choose_release,
    installed_tf_version,
)

SHIPPED = shipped_database_path()


@pytest.mark.parametrize(("installed", "expected"), [
    ("2.15.0", "2.15.1"), ("2.13.0", "2.13.1"), ("2.16.1", "2.16.2"), ("2.12.0", "2.12.1"),
    ("2.16.0rc0", "2.16.2"),  # a release candidate: its minor line's oldest newer patch
    ("2.22.0", "2.21.0"),  # no 2.22 line: the older one on a tie with the nightly's
    ("2.23.0.dev20261130", "2.23.0-dev20261026"),  # a newer nightly: the nightly held
    ("1.12.0", "1.13.2"),  # older than anything held: the oldest
])
def test_a_patch_the_database_lacks_uses_the_nearest_release(installed, expected):
    chosen = choose_release(db=SHIPPED, tf_version=lambda: installed)
    assert chosen == ChosenRelease(expected, "nearest", installed)
    assert chosen.note == (f"facts of TensorFlow {expected}: the nearest release in the "
                           f"database to the installed TensorFlow {installed}")


def test_the_installed_release_itself_when_held():
    for installed in ("2.15.1", "2.21.0", "2.21"):
        chosen = choose_release(db=SHIPPED, tf_version=functools.partial(str, installed))
        assert chosen.why == "installed", chosen
        assert chosen.version.startswith(installed)
    assert choose_release(db=SHIPPED, tf_version=lambda: "2.15.1").note == \
        "facts of TensorFlow 2.15.1: the installed TensorFlow"


def test_without_tensorflow_the_newest_final_release():
    chosen = choose_release(db=SHIPPED, tf_version=lambda: None)
    assert chosen == ChosenRelease("2.21.0", "newest")
    assert chosen.note.endswith("the newest release in the database (no TensorFlow "
                                "installed)")


def test_asked_for_wins_and_is_resolved_once():
    def never() -> str:
        raise AssertionError("the installed TensorFlow is not read for --tf")

    chosen = choose_release("2.15", db=SHIPPED, tf_version=never)
    assert chosen == ChosenRelease("2.15.1", "asked", asked="2.15")
    assert chosen.note == "facts of TensorFlow 2.15.1: as asked (2.15)"
    with pytest.raises(UnknownReleaseError, match="unknown release '9.9'"):
        choose_release("9.9", db=SHIPPED)


def test_a_database_without_tensorflow_releases_is_one_error(small_db):
    import sqlite3

    db = small_db()  # one release, 2.1.0
    assert choose_release(db=db, tf_version=lambda: "2.15.0") == \
        ChosenRelease("2.1.0", "nearest", "2.15.0")
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM releases")
    with pytest.raises(DatabaseError, match="holds no TensorFlow releases"):
        choose_release(db=db, tf_version=lambda: "2.15.0")


def test_check_and_check_files_say_which_release_and_why_on_stderr(cli, tmp_path):
    """The command line says the rule's release (whatever TensorFlow this venv has:
    none in the quick tier's own venv), once, beside the summary; the API warns only
    when it stands in another release for the installed one."""
    from test_output_file import BLOCKED  # tests/unit is on sys.path

    import opregistry

    graph = tmp_path / "blocked.pbtxt"
    graph.write_text(BLOCKED)
    expected = choose_release(db=SHIPPED)
    assert expected.why == ("newest" if installed_tf_version() is None else "installed")
    done = cli("check", str(graph), "--db", str(SHIPPED))
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == expected.note, done.stderr
    assert f"against TensorFlow {expected.version}" in lines[1], done.stderr
    done = cli("check-files", str(graph), "--db", str(SHIPPED), "--tf", "2.15")
    assert done.returncode == 1, done.stderr
    assert "facts of TensorFlow 2.15.1: as asked (2.15)" in done.stderr.splitlines()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReleaseWarning)  # the installed one: no warning
        assert opregistry.check(str(graph), db=SHIPPED).release == expected.version
