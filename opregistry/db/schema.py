"""Facts about the schema that the SQLAlchemy-free read path needs too."""

# The Alembic revision the code expects; kept in step with migrations/versions.
HEAD_REVISION = "0001_initial"

GRADIENT_STATES = ("registered", "no_gradient", "missing")
