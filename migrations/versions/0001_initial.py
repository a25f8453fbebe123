"""Initial schema: releases, deduplicated OpDefs and gradient functions, per-release
op rows with the three-state gradient registry status, orphan registry entries and
public Python names.

Revision ID: 0001_initial
Revises: 
Create Date: 2026-11-30 10:06:27.520649
"""
from alembic import op
import sqlalchemy as sa


revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('gradient_functions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('module', sa.String(length=256), nullable=True),
    sa.Column('qualname', sa.String(length=256), nullable=True),
    sa.Column('source_file', sa.String(length=512), nullable=True),
    sa.Column('line', sa.Integer(), nullable=True),
    sa.Column('source_hash', sa.String(length=64), nullable=True),
    sa.Column('hash_method', sa.String(length=16), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_gradient_functions')),
    sa.UniqueConstraint('digest', name=op.f('uq_gradient_functions_digest'))
    )
    with op.batch_alter_table('gradient_functions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gradient_functions_source_hash'), ['source_hash'], unique=False)

    op.create_table('op_defs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('is_stateful', sa.Boolean(), nullable=False),
    sa.Column('deprecated_in', sa.Integer(), nullable=True),
    sa.Column('definition', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_op_defs')),
    sa.UniqueConstraint('digest', name=op.f('uq_op_defs_digest'))
    )
    with op.batch_alter_table('op_defs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_op_defs_name'), ['name'], unique=False)

    op.create_table('python_names',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('op_name', sa.String(length=256), nullable=False),
    sa.Column('method', sa.String(length=32), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_python_names')),
    sa.UniqueConstraint('name', 'op_name', 'method', name=op.f('uq_python_names_name'))
    )
    with op.batch_alter_table('python_names', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_python_names_name'), ['name'], unique=False)

    op.create_table('releases',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('package', sa.String(length=64), nullable=False),
    sa.Column('package_version', sa.String(length=64), nullable=False),
    sa.Column('git_version', sa.String(length=128), nullable=True),
    sa.Column('python_version', sa.String(length=32), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('machine', sa.String(length=32), nullable=False),
    sa.Column('harvested_at', sa.String(length=32), nullable=False),
    sa.Column('collector_format', sa.Integer(), nullable=False),
    sa.Column('raw_ops_available', sa.Boolean(), nullable=False),
    sa.Column('imports_attempted', sa.Integer(), nullable=False),
    sa.Column('import_failures', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_releases')),
    sa.UniqueConstraint('version', 'package', name=op.f('uq_releases_version'))
    )
    with op.batch_alter_table('releases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_releases_version'), ['version'], unique=False)

    op.create_table('orphan_gradients',
    sa.Column('release_id', sa.Integer(), nullable=False),
    sa.Column('op_name', sa.String(length=256), nullable=False),
    sa.Column('gradient', sa.String(length=16), nullable=False),
    sa.Column('gradient_function_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['gradient_function_id'], ['gradient_functions.id'], name=op.f('fk_orphan_gradients_gradient_function_id_gradient_functions')),
    sa.ForeignKeyConstraint(['release_id'], ['releases.id'], name=op.f('fk_orphan_gradients_release_id_releases'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('release_id', 'op_name', name=op.f('pk_orphan_gradients'))
    )
    op.create_table('release_ops',
    sa.Column('release_id', sa.Integer(), nullable=False),
    sa.Column('op_name', sa.String(length=256), nullable=False),
    sa.Column('op_def_id', sa.Integer(), nullable=False),
    sa.Column('public', sa.Boolean(), nullable=True),
    sa.Column('gradient', sa.String(length=16), nullable=False),
    sa.Column('gradient_function_id', sa.Integer(), nullable=True),
    sa.Column('needs_import', sa.String(length=256), nullable=True),
    sa.ForeignKeyConstraint(['gradient_function_id'], ['gradient_functions.id'], name=op.f('fk_release_ops_gradient_function_id_gradient_functions')),
    sa.ForeignKeyConstraint(['op_def_id'], ['op_defs.id'], name=op.f('fk_release_ops_op_def_id_op_defs')),
    sa.ForeignKeyConstraint(['release_id'], ['releases.id'], name=op.f('fk_release_ops_release_id_releases'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('release_id', 'op_name', name=op.f('pk_release_ops'))
    )
    with op.batch_alter_table('release_ops', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_release_ops_gradient_function_id'), ['gradient_function_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_release_ops_op_def_id'), ['op_def_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_release_ops_op_name'), ['op_name'], unique=False)

    op.create_table('release_python_names',
    sa.Column('release_id', sa.Integer(), nullable=False),
    sa.Column('python_name_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['python_name_id'], ['python_names.id'], name=op.f('fk_release_python_names_python_name_id_python_names')),
    sa.ForeignKeyConstraint(['release_id'], ['releases.id'], name=op.f('fk_release_python_names_release_id_releases'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('release_id', 'python_name_id', name=op.f('pk_release_python_names'))
    )
    with op.batch_alter_table('release_python_names', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_release_python_names_python_name_id'), ['python_name_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('release_python_names', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_release_python_names_python_name_id'))

    op.drop_table('release_python_names')
    with op.batch_alter_table('release_ops', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_release_ops_op_name'))
        batch_op.drop_index(batch_op.f('ix_release_ops_op_def_id'))
        batch_op.drop_index(batch_op.f('ix_release_ops_gradient_function_id'))

    op.drop_table('release_ops')
    op.drop_table('orphan_gradients')
    with op.batch_alter_table('releases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_releases_version'))

    op.drop_table('releases')
    with op.batch_alter_table('python_names', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_python_names_name'))

    op.drop_table('python_names')
    with op.batch_alter_table('op_defs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_op_defs_name'))

    op.drop_table('op_defs')
    with op.batch_alter_table('gradient_functions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gradient_functions_source_hash'))

    op.drop_table('gradient_functions')
