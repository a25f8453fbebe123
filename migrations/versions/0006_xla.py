"""XLA: whether each op and its gradient compile with XLA, per release and device type
(issue 25). A table of its own, keyed by device, so a harvest on a GPU or TPU host adds
rows beside the CPU ones instead of overwriting them.

Revision ID: 0006_xla
Revises: 0005_library_releases
"""
import sqlalchemy as sa
from alembic import op

revision = "0006_xla"
down_revision = "0005_library_releases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
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
    with op.batch_alter_table("op_xla", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_op_xla_forward"), ["forward"], unique=False)
        batch_op.create_index(batch_op.f("ix_op_xla_gradient"), ["gradient"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("op_xla", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_op_xla_gradient"))
        batch_op.drop_index(batch_op.f("ix_op_xla_forward"))
    op.drop_table("op_xla")
