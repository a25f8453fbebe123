"""The database's vocabulary (gradient, effective, per-input and verification states)
and the schema revision the code expects: what the SQLAlchemy-free read path needs too."""

# The Alembic revision the code expects; kept in step with migrations/versions.
HEAD_REVISION = "0009_xla_variants"

GRADIENT_STATES = ("registered", "no_gradient", "missing")
EFFECTIVE_STATES = ("differentiable", "partial", "none", "no_gradient", "missing", "unknown")
INPUT_RESULTS = ("gradient", "none", "zero", "raises")
VERIFICATION_STATES = ("verified", "flagged", "not_verified")
SECOND_ORDER_STATES = ("differentiable", "blocked", "unknown")
XLA_STATES = ("compiles", "fails", "unknown")
# the harvest's reason (opregistry/harvest/inenv/xla.py) for an op whose gradient gives
# XLA nothing to compile (Floor's None, an op without a gradient): nothing to refuse
XLA_NOTHING_TO_COMPILE = "no gradient to compile"
