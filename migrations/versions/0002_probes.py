"""Probe results: effective differentiability, per-input gradients, second order and
numerical verification for every op with a registered gradient.

Existing releases keep their rows; the new columns stay NULL ("not probed") until
the release is harvested again with probes.

Revision ID: 0002_probes
Revises: 0001_initial
"""
import sqlalchemy as sa
from alembic import op

revision = "0002_probes"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

_RELEASE_OP_COLUMNS = (
    ("effective", sa.String(length=16)),
    ("probe_reason", sa.Text()),
    ("second_order", sa.String(length=16)),
    ("second_order_blockers", sa.Text()),
    ("verification", sa.String(length=16)),
    ("verification_dtype", sa.String(length=16)),
    ("verification_error", sa.Float()),
    ("verification_tolerance", sa.Float()),
    ("verification_reason", sa.Text()),
    ("verification_detail", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("probe_seconds", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("probe_restarts", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("numeric_checked", sa.Boolean(), nullable=True))
    with op.batch_alter_table("release_ops", schema=None) as batch_op:
        for name, type_ in _RELEASE_OP_COLUMNS:
            batch_op.add_column(sa.Column(name, type_, nullable=True))
        batch_op.create_index(batch_op.f("ix_release_ops_effective"), ["effective"], unique=False)
    op.create_table(
        "op_inputs",
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(length=256), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("dtype", sa.String(length=32), nullable=False),
        sa.Column("trainable", sa.Boolean(), nullable=False),
        sa.Column("result", sa.String(length=16), nullable=False),
        sa.Column("numeric_error", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["release_id"], ["releases.id"],
                                name=op.f("fk_op_inputs_release_id_releases"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("release_id", "op_name", "position", name=op.f("pk_op_inputs")),
    )


def downgrade() -> None:
    op.drop_table("op_inputs")
    with op.batch_alter_table("release_ops", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_release_ops_effective"))
        for name, _ in reversed(_RELEASE_OP_COLUMNS):
            batch_op.drop_column(name)
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.drop_column("numeric_checked")
        batch_op.drop_column("probe_restarts")
        batch_op.drop_column("probe_seconds")
