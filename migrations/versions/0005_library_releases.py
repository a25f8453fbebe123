"""Op-library releases: a release row may be what an op library (tensorflow-text 2.21.1)
adds to the TensorFlow release it was harvested with. ``library`` is '' for TensorFlow
itself, so the unique key (version, package, library, library_version) holds for core
releases too (NULLs would be distinct in a unique constraint).

Revision ID: 0005_library_releases
Revises: 0004_function_sources
"""
import sqlalchemy as sa
from alembic import op

revision = "0005_library_releases"
down_revision = "0004_function_sources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("library", sa.String(length=64), nullable=False,
                                      server_default=""))
        batch_op.add_column(sa.Column("library_version", sa.String(length=64), nullable=False,
                                      server_default=""))
        batch_op.add_column(sa.Column("library_detail", sa.Text(), nullable=True))
        batch_op.drop_constraint(batch_op.f("uq_releases_version"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_releases_version"),
            ["version", "package", "library", "library_version"])
        batch_op.create_index(batch_op.f("ix_releases_library"), ["library"], unique=False)


def downgrade() -> None:
    # library releases cannot be represented before this revision: they are dropped
    releases = sa.table("releases", sa.column("id"), sa.column("library"))
    library_ids = sa.select(releases.c.id).where(releases.c.library != "")
    for name in ("release_ops", "op_inputs", "orphan_gradients", "release_python_names"):
        table = sa.table(name, sa.column("release_id"))
        op.execute(table.delete().where(table.c.release_id.in_(library_ids)))
    op.execute(releases.delete().where(releases.c.library != ""))
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_releases_library"))
        batch_op.drop_constraint(batch_op.f("uq_releases_version"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_releases_version"),
                                          ["version", "package"])
        batch_op.drop_column("library_detail")
        batch_op.drop_column("library_version")
        batch_op.drop_column("library")
