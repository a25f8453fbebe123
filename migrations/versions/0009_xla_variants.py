"""XLA verdicts per attribute setting (issue 37): an op's XLA kernel may take some values
of an attribute and refuse others (TridiagonalSolve's ``partial_pivoting``, the resize
ops' ``align_corners`` / ``half_pixel_centers``). ``op_xla_variants`` points at one
``xla_verdicts`` row per (release, op, device, setting); ``op_xla`` keeps the op's
verdict as harvested (its default setting), which ``check --xla`` falls back to.

A new table: releases harvested before it have no rows in it and answer as before;
downgrading drops it (the verdicts it alone used go with it).

Revision ID: 0009_xla_variants
Revises: 0008_xla_verdicts
"""
import sqlalchemy as sa
from alembic import op

revision = "0009_xla_variants"
down_revision = "0008_xla_verdicts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "op_xla_variants",
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(length=256), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("attrs", sa.String(length=1024), nullable=False),
        sa.Column("verdict_id", sa.Integer(), nullable=False),
        sa.Column("gradient_error", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["release_id"], ["releases.id"],
                                name=op.f("fk_op_xla_variants_release_id_releases"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["verdict_id"], ["xla_verdicts.id"],
                                name=op.f("fk_op_xla_variants_verdict_id_xla_verdicts")),
        sa.PrimaryKeyConstraint("release_id", "op_name", "device", "attrs",
                                name=op.f("pk_op_xla_variants")),
    )


def downgrade() -> None:
    op.drop_table("op_xla_variants")
    # the verdicts only variants used (op_xla's are kept)
    op.execute(sa.text("DELETE FROM xla_verdicts WHERE id NOT IN "
                       "(SELECT verdict_id FROM op_xla)"))
