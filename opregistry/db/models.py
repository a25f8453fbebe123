"""SQLAlchemy 2 ORM models.

Deduplication: an OpDef, a gradient function record or a Python-name mapping that
is identical across releases is one row (keyed by a digest or natural key);
per-release tables only point at them.
"""
from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Release(Base):
    """One harvested TensorFlow build, or what an op library added to one.

    ``version``/``package`` always name the TensorFlow; an op library's release
    (revision 0005) also names the library, '' for TensorFlow itself."""

    __tablename__ = "releases"
    __table_args__ = (UniqueConstraint("version", "package", "library", "library_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64), index=True)
    package: Mapped[str] = mapped_column(String(64))
    package_version: Mapped[str] = mapped_column(String(64))
    git_version: Mapped[str | None] = mapped_column(String(128))
    python_version: Mapped[str] = mapped_column(String(32))
    platform: Mapped[str] = mapped_column(String(32))
    machine: Mapped[str] = mapped_column(String(32))
    harvested_at: Mapped[str] = mapped_column(String(32))
    collector_format: Mapped[int] = mapped_column(Integer)
    raw_ops_available: Mapped[bool] = mapped_column(Boolean)
    imports_attempted: Mapped[int] = mapped_column(Integer)
    import_failures: Mapped[str] = mapped_column(Text, default="[]")  # JSON list
    # Probes (revision 0002); NULL for releases harvested without them.
    probe_seconds: Mapped[float | None] = mapped_column(Float)
    probe_restarts: Mapped[int | None] = mapped_column(Integer)
    numeric_checked: Mapped[bool | None] = mapped_column(Boolean)
    library: Mapped[str] = mapped_column(String(64), default="", server_default="", index=True)
    library_version: Mapped[str] = mapped_column(String(64), default="", server_default="")
    library_detail: Mapped[str | None] = mapped_column(Text)  # JSON: modules, .so files

    ops: Mapped[list[ReleaseOp]] = relationship(
        back_populates="release", cascade="all, delete-orphan", passive_deletes=True)


class OpDef(Base):
    """An OpDef as the collector recorded it, stored once per distinct content."""

    __tablename__ = "op_defs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(256), index=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    is_stateful: Mapped[bool] = mapped_column(Boolean)
    deprecated_in: Mapped[int | None] = mapped_column(Integer)  # GraphDef version
    definition: Mapped[str] = mapped_column(Text)  # canonical JSON


class GradientFunction(Base):
    """A registered Python gradient function, stored once per distinct record."""

    __tablename__ = "gradient_functions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    module: Mapped[str | None] = mapped_column(String(256))
    qualname: Mapped[str | None] = mapped_column(String(256))
    source_file: Mapped[str | None] = mapped_column(String(512))
    line: Mapped[int | None] = mapped_column(Integer)
    source_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    hash_method: Mapped[str | None] = mapped_column(String(16))
    # revision 0004; NULL for releases harvested before it
    source_id: Mapped[int | None] = mapped_column(ForeignKey("function_sources.id"))


class FunctionSource(Base):
    """The source text of a gradient function, stored once however many releases and
    function records (a line number moves, the text stays) share it."""

    __tablename__ = "function_sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of the text
    text: Mapped[str] = mapped_column(Text)


class ReleaseOp(Base):
    """An op of the C++ registry in one release, with its gradient registry state."""

    __tablename__ = "release_ops"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    op_name: Mapped[str] = mapped_column(String(256), primary_key=True, index=True)
    op_def_id: Mapped[int] = mapped_column(ForeignKey("op_defs.id"), index=True)
    public: Mapped[bool | None] = mapped_column(Boolean)  # None: no tf.raw_ops (TF 1.13)
    gradient: Mapped[str] = mapped_column(String(16))  # registered | no_gradient | missing
    gradient_function_id: Mapped[int | None] = mapped_column(
        ForeignKey("gradient_functions.id"), index=True)
    # The module that must be imported for the registry entry to exist, when
    # `import tensorflow` alone does not create it.
    needs_import: Mapped[str | None] = mapped_column(String(256))
    # What the probe found (revision 0002). NULL where no probe ran.
    effective: Mapped[str | None] = mapped_column(String(16), index=True)
    probe_reason: Mapped[str | None] = mapped_column(Text)
    second_order: Mapped[str | None] = mapped_column(String(16))
    second_order_blockers: Mapped[str | None] = mapped_column(Text)  # JSON list
    verification: Mapped[str | None] = mapped_column(String(16))  # verified|flagged|not_verified
    verification_dtype: Mapped[str | None] = mapped_column(String(16))
    verification_error: Mapped[float | None] = mapped_column(Float)
    verification_tolerance: Mapped[float | None] = mapped_column(Float)
    verification_reason: Mapped[str | None] = mapped_column(Text)
    verification_detail: Mapped[str | None] = mapped_column(Text)  # JSON

    release: Mapped[Release] = relationship(back_populates="ops")


class OpInput(Base):
    """What the gradient function gives one input of an op, in one release."""

    __tablename__ = "op_inputs"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    op_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    dtype: Mapped[str] = mapped_column(String(32))
    carries_gradient: Mapped[bool] = mapped_column(Boolean)  # float, complex, resource, variant
    result: Mapped[str] = mapped_column(String(16))  # gradient | none | zero | raises
    numeric_error: Mapped[float | None] = mapped_column(Float)
    # revision 0007: JSON list, per output position of an op with several, what that
    # output's upstream gradient gives this input (gradient | none | zero); NULL: not
    # probed per output (one output, a function-running op, an older harvest)
    by_output: Mapped[str | None] = mapped_column(Text)


class OrphanGradient(Base):
    """A gradient registry entry whose name is not an op of the C++ registry."""

    __tablename__ = "orphan_gradients"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    op_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    gradient: Mapped[str] = mapped_column(String(16))
    gradient_function_id: Mapped[int | None] = mapped_column(
        ForeignKey("gradient_functions.id"))


class PythonName(Base):
    """A public Python name (``tf.math.floor``) that leads to an op, and how we know."""

    __tablename__ = "python_names"
    __table_args__ = (UniqueConstraint("name", "op_name", "method"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), index=True)
    op_name: Mapped[str] = mapped_column(String(256))
    method: Mapped[str] = mapped_column(String(32))


class ReleasePythonName(Base):
    __tablename__ = "release_python_names"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    python_name_id: Mapped[int] = mapped_column(
        ForeignKey("python_names.id"), primary_key=True, index=True)


class NameTrace(Base):
    """What TensorFlow built when a public Python name was called with generated
    arguments (revision 0010, issue 39): ``ops``, space-separated and sorted, with the
    argument ``family`` of the call; or, for a name no generated call reached, ``why``
    (not a function of that release, never called, a parameter no generator makes...).
    Stored once however many releases share it: most releases trace a name alike."""

    __tablename__ = "name_traces"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(256), index=True)
    family: Mapped[str | None] = mapped_column(String(64))
    ops: Mapped[str] = mapped_column(Text)  # "" where not traced
    why: Mapped[str | None] = mapped_column(Text)


class ReleaseNameTrace(Base):
    """A release's trace of one of its public names (one per name: the loader's
    documents name each once)."""

    __tablename__ = "release_name_traces"
    __table_args__ = {"sqlite_with_rowid": False}  # two ints: the key is the row

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    trace_id: Mapped[int] = mapped_column(ForeignKey("name_traces.id"), primary_key=True,
                                          index=True)


class XlaVerdict(Base):
    """Whether an op and its gradient compile with XLA, and why not (revision 0008):
    stored once per distinct verdict however many releases and ops share it (most
    releases say the same of an op; thousands of ops share "unsupported" shapes of
    verdict). ``kernels`` is the kernel registry's view (JSON: op type -> device types),
    evidence beside the verdict."""

    __tablename__ = "xla_verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    forward: Mapped[str] = mapped_column(String(16))  # compiles | fails | unknown
    forward_op: Mapped[str | None] = mapped_column(String(256))  # the first unsupported op
    forward_reason: Mapped[str | None] = mapped_column(Text)
    gradient: Mapped[str] = mapped_column(String(16))
    gradient_op: Mapped[str | None] = mapped_column(String(256))
    gradient_structure: Mapped[str | None] = mapped_column(String(64))
    gradient_reason: Mapped[str | None] = mapped_column(Text)
    gradient_agrees: Mapped[bool | None] = mapped_column(Boolean)  # XLA's values = TF's
    kernels: Mapped[str | None] = mapped_column(Text)  # JSON


class OpXla(Base):
    """An op's XLA verdict on one device type, in one release (revision 0006; the
    verdict itself in ``xla_verdicts`` since 0008). CPU rows are compiled and checked by
    the harvest; a harvest on a GPU or TPU host adds its own device rows. The measured
    error of the compiled gradient differs per release: it stays here."""

    __tablename__ = "op_xla"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    op_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    device: Mapped[str] = mapped_column(String(16), primary_key=True)  # CPU | GPU | TPU
    verdict_id: Mapped[int] = mapped_column(ForeignKey("xla_verdicts.id"))
    gradient_error: Mapped[float | None] = mapped_column(Float)


class OpXlaVariant(Base):
    """An op's XLA verdict for one setting of the attributes its XLA kernel tests
    (revision 0009, issue 37): ``attrs`` is the setting as JSON (sorted keys,
    ``{"partial_pivoting": false}``); ``check --xla`` takes the one matching a node's
    attributes, and the op's ``op_xla`` verdict where none matches."""

    __tablename__ = "op_xla_variants"

    release_id: Mapped[int] = mapped_column(
        ForeignKey("releases.id", ondelete="CASCADE"), primary_key=True)
    op_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    device: Mapped[str] = mapped_column(String(16), primary_key=True)
    attrs: Mapped[str] = mapped_column(String(1024), primary_key=True)  # JSON
    verdict_id: Mapped[int] = mapped_column(ForeignKey("xla_verdicts.id"))
    gradient_error: Mapped[float | None] = mapped_column(Float)
