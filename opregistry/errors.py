"""The one exception family the library raises for bad input and environment faults.

The CLI turns any of these into a single ``Error: ...`` line and the exit code below.
"""

EXIT_OK = 0
EXIT_FINDINGS = 1  # some of the work failed or found problems (e.g. one release of many)
EXIT_USAGE = 2  # bad input: unknown op or release, unreadable database, no TensorFlow


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type when it has none), cut at
    ``limit`` characters on a word boundary: the one line the CLI shows."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else type(exc).__name__
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " ..."
    return text


class OpregistryError(Exception):
    """Base class: ``str(error)`` is the one line shown to the user."""

    exit_code = EXIT_USAGE


class UnknownOpError(OpregistryError):
    def __init__(self, name: str, suggestions: list[str]):
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown op or Python name {name!r}{hint}")


class UnknownReleaseError(OpregistryError):
    def __init__(self, release: str, known: list[str], what: str = "release"):
        self.release = release
        self.known = known
        shown = ", ".join(known) if known else "none"
        super().__init__(f"unknown {what} {release!r} (the database holds: {shown})")


class DatabaseError(OpregistryError):
    """The database is missing, unreadable, locked or at the wrong schema revision."""


class HarvestError(OpregistryError):
    """A target environment could not be built or harvested."""


class DocumentError(OpregistryError):
    """A harvest document is malformed or of an unsupported format version."""


class PolicyError(OpregistryError):
    """A policy file or --ignore rule that cannot be used (no reason, a bad date...)."""


class SiteError(OpregistryError):
    """The static site cannot be written where it was asked to go."""


class OutputError(OpregistryError):
    """Standard output or ``-o FILE`` cannot be written, or ``-o`` names an input."""


class DatabaseRecovered(UserWarning):
    """A database was repaired before it was read (an interrupted write's journal rolled
    back): the data is what the last committed write left. The CLI shows it as one line
    on stderr."""
