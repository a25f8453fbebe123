"""The database's vocabulary (gradient, effective, per-input and verification states)
and the schema revision the code expects: what the SQLAlchemy-free read path needs too.
The words ARCHITECTURE names are opregistry.vocabulary's types, read here as lists."""
from __future__ import annotations

from typing import get_args

from opregistry.vocabulary import Effective, GradientStatus, XlaStatus

# The Alembic revision the code expects; kept in step with migrations/versions.
HEAD_REVISION = "0010_name_traces"

GRADIENT_STATES: tuple[GradientStatus, ...] = get_args(GradientStatus)
EFFECTIVE_STATES: tuple[Effective, ...] = get_args(Effective)
INPUT_RESULTS = ("gradient", "none", "zero", "raises")
VERIFICATION_STATES = ("verified", "flagged", "not_verified")
SECOND_ORDER_STATES = ("differentiable", "blocked", "unknown")
XLA_STATES: tuple[XlaStatus, ...] = get_args(XlaStatus)
# the harvest's reason (opregistry/harvest/inenv/xla.py) for an op whose gradient gives
# XLA nothing to compile (Floor's None, an op without a gradient): nothing to refuse
XLA_NOTHING_TO_COMPILE = "no gradient to compile"
