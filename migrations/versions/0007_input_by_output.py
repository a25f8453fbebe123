"""Per-output gradient facts: for an op of several outputs, what each output's upstream
gradient gives each input (issue 22). FusedBatchNorm's gradient reads only the
normalised value's upstream, so its batch mean gives the input nothing, which a fact
per input cannot say. A nullable column: releases harvested before it keep NULL, and
the analysis then treats the op as today (every output passes what the input gets).

Revision ID: 0007_input_by_output
Revises: 0006_xla
"""
import sqlalchemy as sa
from alembic import op

revision = "0007_input_by_output"
down_revision = "0006_xla"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("op_inputs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("by_output", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("op_inputs", schema=None) as batch_op:
        batch_op.drop_column("by_output")
