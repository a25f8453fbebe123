"""The source text of gradient functions (what `diff --source` shows), deduplicated in
function_sources; gradient_functions points at it. Releases harvested before keep a
NULL source until they are harvested again.

Revision ID: 0004_function_sources
Revises: 0003_carries_gradient
"""
import sqlalchemy as sa
from alembic import op

revision = "0004_function_sources"
down_revision = "0003_carries_gradient"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "function_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_function_sources")),
        sa.UniqueConstraint("digest", name=op.f("uq_function_sources_digest")),
    )
    with op.batch_alter_table("gradient_functions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_gradient_functions_source_id_function_sources"),
            "function_sources", ["source_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("gradient_functions", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_gradient_functions_source_id_function_sources"), type_="foreignkey")
        batch_op.drop_column("source_id")
    op.drop_table("function_sources")
