"""Release version strings in one order (PEP 440's, as ``packaging.version`` sorts
them, without importing it): TF's finals, release candidates and nightlies."""
from __future__ import annotations

import re
from typing import Any


def is_prerelease(version: str) -> bool:
    """``2.23.0.dev20261026``, ``2.16.0rc0``, ``2.22.0-dev20261130``: not a final release."""
    match = _VERSION.fullmatch(version.strip())  # the parser version_key sorts with
    return match is not None and bool(match["pre"] or match["dev"])


_VERSION = re.compile(
    r"v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*)|-(?P<post_implicit>\d+))?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d*))?"
    r"(?:\+[a-z0-9._-]*)?", re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def version_key(version: str) -> tuple[Any, ...]:
    """Sort key for versions, in PEP 440 order (as ``packaging.version`` sorts them):
    ``2.9.3`` < ``2.10.1``; ``2.16.0.dev1`` < ``2.16.0a1`` < ``2.16.0rc0`` < ``2.16.0`` <
    ``2.16.0.post1``; nightlies (``2.22.0-dev20261130``) before the release they lead to.
    A string that is no version (an op library's empty version) sorts first, by text."""
    match = _VERSION.fullmatch(version.strip())
    if match is None:
        return (0, (), (0, 0), -1, (1, 0), version)
    release = tuple(int(part) for part in match["release"].split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]  # 2.9 == 2.9.0
    post = match["post"] if match["post"] is not None else match["post_implicit"]
    if match["pre"]:
        pre = (_PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    elif match["dev"] and post is None:
        pre = (-1, 0)  # a dev release of the final comes before its pre-releases
    else:
        pre = (3, 0)
    dev = (0, int(match["dev_n"] or 0)) if match["dev"] else (1, 0)
    return (1, release, pre, int(post or 0) if post is not None else -1, dev, version)


def release_numbers(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a version as ``version_key`` reads it (``2.16.0rc1``:
    ``(2, 16, 0)``); ``(0, 0, 0)`` for a string that is no version."""
    numbers = tuple(version_key(version)[1]) + (0, 0, 0)
    return numbers[0], numbers[1], numbers[2]
