"""XLA verdicts stored once: ``xla_verdicts`` holds each distinct verdict (forward and
gradient status, the op refused, the reason, the kernel registry's view) and ``op_xla``
points at it per release, op and device, with the gradient's measured error. Releases
mostly say the same of an op, and the ops without a registered gradient, compiled alone
since document format 4, add some 1,500 rows per release: stored inline they would
have taken the shipped database past 40 MB.

The data moves in both directions; nothing is lost.

Revision ID: 0008_xla_verdicts
Revises: 0007_input_by_output
"""
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0008_xla_verdicts"
down_revision = "0007_input_by_output"
branch_labels = None
depends_on = None

VERDICT = ("forward", "forward_op", "forward_reason", "gradient", "gradient_op",
           "gradient_structure", "gradient_reason", "gradient_agrees", "kernels")
KEY = ("release_id", "op_name", "device")


def digest(row):
    """The verdict's digest: opregistry/db/loader.py computes the same."""
    return hashlib.sha256(json.dumps(
        [row[c] if c != "gradient_agrees" or row[c] is None else bool(row[c])
         for c in VERDICT]).encode()).hexdigest()


def _wide_table():
    return op.create_table(
        "op_xla",
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(length=256), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("forward", sa.String(length=16), nullable=False),
        sa.Column("forward_op", sa.String(length=256), nullable=True),
        sa.Column("forward_reason", sa.Text(), nullable=True),
        sa.Column("gradient", sa.String(length=16), nullable=False),
        sa.Column("gradient_op", sa.String(length=256), nullable=True),
        sa.Column("gradient_structure", sa.String(length=64), nullable=True),
        sa.Column("gradient_reason", sa.Text(), nullable=True),
        sa.Column("gradient_agrees", sa.Boolean(), nullable=True),
        sa.Column("gradient_error", sa.Float(), nullable=True),
        sa.Column("kernels", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["release_id"], ["releases.id"],
                                name=op.f("fk_op_xla_release_id_releases"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("release_id", "op_name", "device", name=op.f("pk_op_xla")),
    )


def _read(sql):
    return [dict(r._mapping) for r in op.get_bind().execute(sa.text(sql))]


def _insert(table, rows):
    for start in range(0, len(rows), 2000):
        op.bulk_insert(table, rows[start:start + 2000])


def upgrade() -> None:
    rows = _read("SELECT * FROM op_xla")
    with op.batch_alter_table("op_xla", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_op_xla_gradient"))
        batch_op.drop_index(batch_op.f("ix_op_xla_forward"))
    op.drop_table("op_xla")
    verdicts = op.create_table(
        "xla_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("forward", sa.String(length=16), nullable=False),
        sa.Column("forward_op", sa.String(length=256), nullable=True),
        sa.Column("forward_reason", sa.Text(), nullable=True),
        sa.Column("gradient", sa.String(length=16), nullable=False),
        sa.Column("gradient_op", sa.String(length=256), nullable=True),
        sa.Column("gradient_structure", sa.String(length=64), nullable=True),
        sa.Column("gradient_reason", sa.Text(), nullable=True),
        sa.Column("gradient_agrees", sa.Boolean(), nullable=True),
        sa.Column("kernels", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xla_verdicts")),
        sa.UniqueConstraint("digest", name=op.f("uq_xla_verdicts_digest")),
    )
    narrow = op.create_table(
        "op_xla",
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(length=256), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("verdict_id", sa.Integer(), nullable=False),
        sa.Column("gradient_error", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["release_id"], ["releases.id"],
                                name=op.f("fk_op_xla_release_id_releases"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["verdict_id"], ["xla_verdicts.id"],
                                name=op.f("fk_op_xla_verdict_id_xla_verdicts")),
        sa.PrimaryKeyConstraint("release_id", "op_name", "device", name=op.f("pk_op_xla")),
    )
    ids, distinct = {}, []
    for row in rows:
        key = digest(row)
        if key not in ids:
            ids[key] = len(distinct) + 1
            distinct.append(dict({c: row[c] for c in VERDICT}, id=ids[key], digest=key))
    _insert(verdicts, distinct)
    _insert(narrow, [dict({c: row[c] for c in KEY}, verdict_id=ids[digest(row)],
                          gradient_error=row["gradient_error"]) for row in rows])
    if op.get_bind().dialect.name == "postgresql" and distinct:  # ids given explicitly
        op.execute(sa.text("SELECT setval(pg_get_serial_sequence('xla_verdicts', 'id'), "
                           "(SELECT MAX(id) FROM xla_verdicts))"))


def downgrade() -> None:
    rows = _read("SELECT " + ", ".join(f"x.{c}" for c in KEY) + ", x.gradient_error, " +
                 ", ".join(f"v.{c}" for c in VERDICT) +
                 " FROM op_xla x JOIN xla_verdicts v ON v.id = x.verdict_id")
    op.drop_table("op_xla")
    op.drop_table("xla_verdicts")
    wide = _wide_table()
    with op.batch_alter_table("op_xla", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_op_xla_forward"), ["forward"], unique=False)
        batch_op.create_index(batch_op.f("ix_op_xla_gradient"), ["gradient"], unique=False)
    _insert(wide, rows)
