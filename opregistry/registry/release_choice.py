"""Which release's facts a command uses: the one rule every command and the API share.

Asked for (``--tf``, ``release=``): that release as the database names it. Else, where
TensorFlow is installed, the release nearest to it (the same one when the database
holds it: with TF 2.15.0 installed, 2.15.1's facts, not the newest release's); else the
newest final release. ``ChosenRelease`` says which case it was, and ``note`` the line for stderr."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from opregistry.db.location import DbLike
from opregistry.db.store import ReleaseRow, Store, using
from opregistry.db.versions import release_numbers, version_key
from opregistry.errors import DatabaseError

# the distributions TensorFlow is installed as (read from package metadata: no import)
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-intel")


@dataclass(frozen=True)
class ChosenRelease:
    """A release and why it was chosen: ``asked`` (named by the caller), ``installed``
    (the installed TensorFlow's own), ``nearest`` (the nearest to the installed
    TensorFlow, which the database does not hold) or ``newest`` (no TensorFlow
    installed)."""

    version: str
    why: Literal["asked", "installed", "nearest", "newest"]
    installed: str | None = None  # the installed TensorFlow's version, if any
    asked: str | None = None  # the release as the caller named it

    @property
    def reason(self) -> str:
        """Why, as a clause."""
        if self.why == "asked":
            return f"as asked ({self.asked})"
        if self.why == "installed":
            return "the installed TensorFlow"
        if self.why == "nearest":
            return (f"the nearest release in the database to the installed TensorFlow "
                    f"{self.installed}")
        return "the newest release in the database (no TensorFlow installed)"

    @property
    def note(self) -> str:
        """The line commands print on stderr."""
        return f"facts of TensorFlow {self.version}: {self.reason}"


def installed_tf_version() -> str | None:
    """The installed TensorFlow's version, from package metadata (TF is not imported)."""
    from importlib import metadata

    for name in TF_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def nearest_release(installed: str, known: list[str]) -> str | None:
    """The release of ``known`` closest to ``installed``: the same one, else in its minor
    line the newest not newer than it (else the oldest newer), else the nearest minor line
    (an older one on a tie). Versions compare as ``version_key`` orders them."""
    if not known:
        return None
    if installed in known:
        return installed
    want, want_key = release_numbers(installed), version_key(installed)

    def distance(version: str) -> tuple[int, int]:
        have = release_numbers(version)
        minor_gap = abs((have[0] * 1000 + have[1]) - (want[0] * 1000 + want[1]))
        return minor_gap, 0 if version_key(version) <= want_key else 1

    best = min(distance(version) for version in known)
    tied = [version for version in known if distance(version) == best]
    # the newest of the older ones, else the oldest of the newer ones: the nearest
    return max(tied, key=version_key) if best[1] == 0 else min(tied, key=version_key)


def choose_release(requested: str | None = None, db: DbLike = None, *,
                   tf_version: Callable[[], str | None] = installed_tf_version
                   ) -> ChosenRelease:
    """The release to use for ``requested`` (None: the default rule above), resolved
    once against the database (an unknown one raises ``UnknownReleaseError``, an empty
    database ``DatabaseError``). ``tf_version``: what says the installed TensorFlow's
    version (None: none installed); by default its package metadata."""
    with using(db) as store:
        if requested is not None:
            return ChosenRelease(store.release(requested).version, "asked", asked=requested)
        installed = tf_version()
        if installed is None:
            return ChosenRelease(store.release("latest").version, "newest")
        # (no TensorFlow release in the database: store.release raises, one Error line)
        chosen = nearest_release(installed, store.release_versions()) or \
            store.release("latest").version
        same = version_key(chosen)[:-1] == version_key(installed)[:-1]  # 2.21 is 2.21.0
        return ChosenRelease(chosen, "installed" if same else "nearest", installed)


class ReleaseWarning(UserWarning):
    """The API used another release's facts for the installed TensorFlow (a patch the
    database does not hold): which, and why. Pass ``release=`` to choose one."""


def checked_release(store: Store, release: str | None, library: str | None) -> ReleaseRow | None:
    """The TensorFlow release Python names are checked in: ``release`` (a TF release,
    unless ``library`` names an op library), else the newest; None without one."""
    try:
        if release is not None and library in (None, "tensorflow"):
            return store.release(release)
        return store.release("latest")
    except DatabaseError:  # no TensorFlow release: nothing to check against
        return None


def wanted_releases(store: Store, release: str | None, library: str | None) -> set[int] | None:
    """Release ids a lookup keeps (None: all)."""
    if library is not None and library != "tensorflow":
        if release is not None:
            return {store.release(release, library=library).id}
        name = library.replace("==", " ").split()[0]
        store.release("latest", library=library)  # an unknown library is an error
        return {r.id for r in store.library_releases(name)}
    if release is None:
        return None if library is None else {r.id for r in store.core_releases()}
    rel = store.release(release)
    if library is not None:  # --library tensorflow: TF's own release only
        return {rel.id}
    return {rel.id} | {r.id for r in store.library_releases_for(rel)}
