"""Database layer: ORM models, loading harvest documents, migrations.

Importing this package imports SQLAlchemy (~0.25 s); the read path in
``opregistry.registry.lookup`` avoids it for SQLite files.
"""
