"""Rename op_inputs.trainable to carries_gradient: the column says whether an input's
type can carry a gradient (float, complex, resource, variant), not whether a variable
is trainable, which is what "trainable" means everywhere else.

Revision ID: 0003_carries_gradient
Revises: 0002_probes
"""
from alembic import op

revision = "0003_carries_gradient"
down_revision = "0002_probes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("op_inputs", schema=None) as batch_op:
        batch_op.alter_column("trainable", new_column_name="carries_gradient")


def downgrade() -> None:
    with op.batch_alter_table("op_inputs", schema=None) as batch_op:
        batch_op.alter_column("carries_gradient", new_column_name="trainable")
