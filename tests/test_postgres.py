"""A real PostgreSQL server (started here from the machine's PostgreSQL binaries)
behind an SQLAlchemy URL: migrations, loading, and every read command must give what
the SQLite file gives for the same harvest.

Marked ``slow`` (CI runs it; the developer tier leaves it out): a PostgreSQL server started and migrated: two minutes of a worker."""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from system_packages import require

pytestmark = pytest.mark.slow

pytest.importorskip("pg8000")


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    require(initdb and pg_ctl, "PostgreSQL (initdb, pg_ctl)")
    assert initdb and pg_ctl  # for mypy: require() stopped the test otherwise
    # PostgreSQL refuses to run as root: run it as the postgres user then
    as_user: list[str] = []
    if os.geteuid() == 0:
        require(shutil.which("runuser"), "runuser (PostgreSQL refuses to run as root)")
        as_user = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="opregistry-pg-"))
    base.chmod(0o755)
    if as_user:
        shutil.chown(base, "postgres")
    data, port = base / "data", _free_port()
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True,  # noqa: E731
                                      capture_output=True, timeout=120)
    run(initdb, "-D", str(data), "--auth=trust", "-U", "postgres")
    run(pg_ctl, "-D", str(data), "-w", "-l", str(base / "log"), "-o",
        f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "start")
    try:
        yield f"postgresql+pg8000://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def _new_database(postgres_url: str, name: str) -> str:
    """The URL of a new, empty database ``name`` on the test's server."""
    import pg8000.native

    host, port = postgres_url.rsplit("@", 1)[1].split("/")[0].split(":")
    admin = pg8000.native.Connection("postgres", host=host, port=int(port))
    admin.run(f"DROP DATABASE IF EXISTS {name}")
    admin.run(f"CREATE DATABASE {name}")
    admin.close()
    return postgres_url.rsplit("/", 1)[0] + "/" + name


def _loaded_into_both(cli: Any, document: dict[str, Any], stem: Path, url: str
                      ) -> tuple[Path, Path]:
    """``document`` written to ``stem``.json and loaded into the PostgreSQL database
    ``url`` and into a new SQLite file ``stem``.sqlite: (the document, the SQLite file)."""
    import json

    path, sqlite = stem.with_suffix(".json"), stem.with_suffix(".sqlite")
    path.write_text(json.dumps(document))
    for db in (url, str(sqlite)):
        done = cli("db", "load", str(path), "--db", db)
        assert done.returncode == 0, done.stderr
    return path, sqlite


READS = [
    ("lookup", "ArgMax", "Round", "MatMul", "--format", "json"),
    ("releases", "--format", "json"),
    ("ops", "--tf", "latest", "--status", "no_gradient", "--format", "csv"),
    ("ops", "--tf", "latest", "--effective", "partial", "--format", "csv"),
    ("probe-report", "--format", "json"),
]


def test_postgres_gives_what_sqlite_gives(postgres_url, tf_document_path, tmp_path, cli):
    sqlite = tmp_path / "same.sqlite"
    for db in (postgres_url, str(sqlite)):
        done = cli("db", "upgrade", "--db", db)
        assert done.returncode == 0, done.stderr
        done = cli("db", "load", str(tf_document_path), "--db", db)
        assert done.returncode == 0, done.stderr
    current = cli("db", "current", "--db", postgres_url)
    assert current.returncode == 0 and "0010_name_traces" in current.stdout + current.stderr
    for args in READS:
        on_pg = cli(*args, "--db", postgres_url)
        on_sqlite = cli(*args, "--db", str(sqlite))
        assert on_pg.returncode == on_sqlite.returncode == 0, (args, on_pg.stderr)
        assert on_pg.stdout == on_sqlite.stdout, args
    # loading the same release again replaces it: nothing doubles
    again = cli("db", "load", str(tf_document_path), "--db", postgres_url)
    assert again.returncode == 0, again.stderr
    assert cli("releases", "--format", "json", "--db", postgres_url).stdout == \
        cli("releases", "--format", "json", "--db", str(sqlite)).stdout


def test_check_against_postgres(postgres_url, tf_document_path, tmp_path, cli):
    tf = pytest.importorskip("tensorflow")
    cli("db", "upgrade", "--db", postgres_url)
    cli("db", "load", str(tf_document_path), "--db", postgres_url)
    module = tf.Module()
    module.w = tf.Variable([[1.0], [2.0]], name="w")
    module.f = tf.function(
        lambda x: {"idx": tf.cast(tf.argmax(tf.matmul(x, module.w), axis=0), tf.float32)},
        input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures=module.f)
    done = cli("check", str(tmp_path / "sm"), "--format", "json", "--db", postgres_url)
    assert done.returncode == 1, done.stderr
    assert "ArgMax" in done.stdout


def test_two_loads_at_once_into_a_new_postgres_database(postgres_url, tf_document_path):
    """Both create the schema and load one release at the same moment: they queue (an
    advisory lock per migration and per load); the second replaces the first."""
    import sys

    import sqlalchemy

    admin = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql("CREATE DATABASE contention")
    admin.dispose()
    url = postgres_url.rsplit("/", 1)[0] + "/contention"
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    procs = [subprocess.Popen([sys.executable, "-m", "opregistry", "db", "load",
                               str(tf_document_path), "--db", url], text=True, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert sorted("(replaced)" in e for e in errs) == [False, True], errs
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM releases").scalar() == 1
    engine.dispose()


def _with_xla(document: dict) -> dict:
    """The harvested document with XLA verdicts: two ops' probes share one verdict, an
    op without a registered gradient has its own (format 4)."""
    import copy

    out = copy.deepcopy(document)
    compiles = {"device": "CPU", "forward": {"status": "compiles"},
                "gradient": {"status": "compiles", "agrees": True, "max_error": 1e-6}}
    given = 0
    for op in out["ops"]:
        if op["name"] in ("MatMul", "Tanh") and "probe" in op:
            op["probe"]["xla"] = copy.deepcopy(compiles)
            given += 1
        elif op["name"] == "Where" and "probe" not in op:
            op["xla"] = {"device": "CPU", "forward": {"status": "fails", "op": "Where"}}
            given += 1
    assert given == 3
    return out


def test_migration_0008_on_postgres_moves_the_verdicts_and_loads_after(postgres_url,
                                                                      tf_document, tmp_path,
                                                                      cli):
    """Down to 0007 and up again on PostgreSQL: the answers stay, and a load after the
    upgrade adds verdicts (the id sequence follows the ids the migration gave)."""
    import json

    url = _new_database(postgres_url, "migration_0008")
    document = tmp_path / "xla.json"
    document.write_text(json.dumps(_with_xla(tf_document)))
    assert cli("db", "load", str(document), "--db", url).returncode == 0
    ask = ("lookup", "MatMul", "Tanh", "Where", "--format", "json", "--db", url)
    before = cli(*ask).stdout
    assert '"compiles"' in before and '"fails"' in before
    down = cli("db", "downgrade", "0007_input_by_output", "--db", url)
    assert down.returncode == 0, down.stderr
    assert cli(*ask).stdout == before  # 0007 is read as it is
    assert cli("db", "upgrade", "--db", url).returncode == 0
    assert cli(*ask).stdout == before
    changed = _with_xla(tf_document)
    for op in changed["ops"]:
        if op["name"] == "Where":
            op["xla"]["forward"]["message"] = "a new verdict after the migration"
    document.write_text(json.dumps(changed))
    again = cli("db", "load", str(document), "--db", url)
    assert again.returncode == 0, again.stderr
    assert "a new verdict after the migration" in cli(*ask).stdout
    vacuumed = cli("db", "vacuum", "--db", url)  # VACUUM ANALYZE, outside a transaction
    assert vacuumed.returncode == 0 and vacuumed.stderr.endswith(": vacuumed\n"), \
        vacuumed.stderr
    assert "a new verdict after the migration" in cli(*ask).stdout


def test_xla_variants_on_postgres_as_on_sqlite_and_migration_0009_both_ways(
        postgres_url, tf_document, tmp_path, cli):
    """Verdicts per attribute setting (issue 37) read the same from PostgreSQL as from
    SQLite; down to 0008 they go (the rest answers as before), up and loaded again they
    come back."""
    import json

    url = _new_database(postgres_url, "migration_0009")
    changed = _with_xla(tf_document)
    for op in changed["ops"]:
        if op["name"] == "MatMul":
            op["probe"]["xla"]["variants"] = [
                {"attrs": {"transpose_a": flag}, "forward": {"status": status},
                 "gradient": {"status": status}} for flag, status in (
                    (False, "compiles"), (True, "fails"))]
    document, sqlite = _loaded_into_both(cli, changed, tmp_path / "variants", url)
    ask = ("lookup", "MatMul", "Tanh", "--format", "json", "--db")
    on_pg = cli(*ask, url).stdout
    assert on_pg == cli(*ask, str(sqlite)).stdout
    (matmul,) = [r for r in json.loads(on_pg) if r["op"] == "MatMul"]
    assert [(v["attrs"], v["forward"]) for v in matmul["xla"]["variants"]] == [
        ({"transpose_a": False}, "compiles"), ({"transpose_a": True}, "fails")]
    down = cli("db", "downgrade", "0008_xla_verdicts", "--db", url)
    assert down.returncode == 0, down.stderr
    assert json.loads(cli(*ask, url).stdout) == [
        dict(r, xla=dict(r["xla"], variants=[])) for r in json.loads(on_pg)]
    assert cli("db", "upgrade", "--db", url).returncode == 0
    assert cli("db", "load", str(document), "--db", url).returncode == 0
    assert cli(*ask, url).stdout == on_pg


def test_name_traces_on_postgres_as_on_sqlite_and_migration_0010_both_ways(
        postgres_url, tf_document, tmp_path, cli):
    """Name traces (issue 39) read the same from PostgreSQL as from SQLite: each lookup
    row's ``traced`` and the name's resolution; down to 0009 the names answer unchecked,
    up and loaded again they are checked again."""
    import json

    url = _new_database(postgres_url, "migration_0010")
    by_name: dict[str, list[str]] = {}
    for entry in tf_document["python_names"]:
        by_name.setdefault(entry["name"], []).append(entry["op"])
    names = sorted(n for n in by_name if n.startswith(("tf.math.", "tf.nn.")))[:40]
    # TF "built" each name's last op (by name), and one name was not traced
    traced = dict(tf_document, name_traces=[
        {"name": n, "family": "square", "ops": sorted(by_name[n])[-1:]} for n in names[1:]]
        + [{"name": names[0], "family": None, "why": "never called (changes the process)"}])
    document, sqlite = _loaded_into_both(cli, traced, tmp_path / "traces", url)
    ask = ("lookup", *names, "--format", "json", "--db")
    on_pg = cli(*ask, url)
    assert on_pg.returncode == 0, on_pg.stderr
    assert (on_pg.stdout, on_pg.stderr) == (lambda d: (d.stdout, d.stderr))(cli(*ask, str(sqlite)))
    rows = json.loads(on_pg.stdout)
    assert {r["traced"] for r in rows} >= {"built", "untraced"}
    assert "not checked by a trace in" in on_pg.stderr and "checked: TF" in on_pg.stderr
    down = cli("db", "downgrade", "0009_xla_variants", "--db", url)
    assert down.returncode == 0, down.stderr
    unchecked = cli(*ask, url)
    assert {r["traced"] for r in json.loads(unchecked.stdout)} == {None}
    assert "was harvested without traces" in unchecked.stderr
    assert cli("db", "upgrade", "--db", url).returncode == 0
    assert cli("db", "load", str(document), "--db", url).returncode == 0
    assert cli(*ask, url).stdout == on_pg.stdout


def test_a_few_ops_probed_again_replace_theirs_on_postgres_as_on_sqlite(
        postgres_url, tf_document, tmp_path, cli):
    """``probes.ops_only`` (data/harvest_probe_ops.py): the listed ops' facts replaced
    in the stored release, the same on PostgreSQL as on SQLite; the other ops as they
    were."""
    import copy
    import json

    url = _new_database(postgres_url, "ops_only")
    _, sqlite = _loaded_into_both(cli, tf_document, tmp_path / "release", url)
    ask = ("lookup", "MatMul", "ArgMax", "Round", "--tf", tf_document["release"]["version"],
           "--format", "json", "--db")
    before = json.loads(cli(*ask, url).stdout)
    again = copy.deepcopy(tf_document)
    again["ops"] = [op for op in again["ops"] if op["name"] == "MatMul"]
    (matmul,) = again["ops"]
    matmul["probe"]["effective"] = "partial"  # as a probe fixed for it would say
    matmul["probe"]["inputs"][1]["result"] = "none"
    again["probes"] = dict(again.get("probes") or {}, ops_only=True)
    (tmp_path / "again.json").write_text(json.dumps(again))
    for db in (url, str(sqlite)):
        done = cli("db", "load", str(tmp_path / "again.json"), "--db", db)
        assert done.returncode == 0, done.stderr
    on_pg, on_sqlite = cli(*ask, url), cli(*ask, str(sqlite))
    assert on_pg.returncode == 0, on_pg.stderr
    assert on_pg.stdout == on_sqlite.stdout
    after = {row["op"]: row for row in json.loads(on_pg.stdout)}
    assert after["MatMul"]["effective"] == "partial"
    assert [row for row in before if row["op"] != "MatMul"] == [
        row for row in json.loads(on_pg.stdout) if row["op"] != "MatMul"]


def test_write_commands_never_touch_another_applications_postgres_database(
        postgres_url, tmp_path, cli):
    """Another application's Alembic database on the server (its own revision, or one
    that happens to be ours): every write command refuses it in one line, and its
    tables stay as they were (issue 35: `db vacuum` ran VACUUM ANALYZE on it)."""
    import json

    import sqlalchemy

    from tests.unit.documents import default_document

    admin = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql("CREATE DATABASE theirs")
    admin.dispose()
    url = postgres_url.rsplit("/", 1)[0] + "/theirs"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) "
                             "NOT NULL PRIMARY KEY)")
        conn.exec_driver_sql("CREATE TABLE notes (body TEXT)")
        conn.exec_driver_sql("INSERT INTO notes VALUES ('n1'), ('n2')")

    def state() -> list[object]:
        with engine.connect() as conn:
            tables = conn.exec_driver_sql(
                "SELECT table_name FROM information_schema.tables WHERE "
                "table_schema = 'public' ORDER BY 1").scalars().all()
            return [tables, conn.exec_driver_sql("SELECT * FROM alembic_version").all(),
                    conn.exec_driver_sql("SELECT body FROM notes ORDER BY 1").all()]

    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(default_document()))
    for revision in ("ae1027a6acf", "0008_xla_verdicts"):
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM alembic_version")
            conn.exec_driver_sql(f"INSERT INTO alembic_version VALUES ('{revision}')")
        before = state()
        for command in (["db", "vacuum"], ["db", "upgrade"], ["db", "load", str(doc)],
                        ["db", "downgrade", "base", "--yes"]):
            done = cli(*command, "--db", url)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert "is not an opregistry database" in done.stderr, done.stderr
            assert state() == before, command
    engine.dispose()
