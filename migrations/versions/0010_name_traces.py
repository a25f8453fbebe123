"""What TensorFlow builds for each public Python name (issue 39): ``name_traces`` holds
each distinct trace of a name (the ops a call with generated arguments built, or why no
call did), ``release_name_traces`` points a release at the trace of each of its names.

New tables: releases loaded before them have no traces and resolve names as before,
unchecked; downgrading drops them.

Revision ID: 0010_name_traces
Revises: 0009_xla_variants
"""
import sqlalchemy as sa
from alembic import op

revision = "0010_name_traces"
down_revision = "0009_xla_variants"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "name_traces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=True),
        sa.Column("ops", sa.Text(), nullable=False),
        sa.Column("why", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_name_traces")),
        sa.UniqueConstraint("digest", name=op.f("uq_name_traces_digest")),
    )
    op.create_index(op.f("ix_name_traces_name"), "name_traces", ["name"], unique=False)
    op.create_table(
        "release_name_traces",
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["release_id"], ["releases.id"],
                                name=op.f("fk_release_name_traces_release_id_releases"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["trace_id"], ["name_traces.id"],
                                name=op.f("fk_release_name_traces_trace_id_name_traces")),
        sa.PrimaryKeyConstraint("release_id", "trace_id", name=op.f("pk_release_name_traces")),
        sqlite_with_rowid=False,  # two ints: the key is the row (PostgreSQL ignores it)
    )
    op.create_index(op.f("ix_release_name_traces_trace_id"), "release_name_traces",
                    ["trace_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_release_name_traces_trace_id"), table_name="release_name_traces")
    op.drop_table("release_name_traces")
    op.drop_index(op.f("ix_name_traces_name"), table_name="name_traces")
    op.drop_table("name_traces")
