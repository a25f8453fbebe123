"""One version ordering (``db.versions.version_key``), in PEP 440 order: the database's
release lists, the history and the guard's nearest release all sort by it."""
from __future__ import annotations

import pytest

from opregistry.db.versions import release_numbers, version_key
from opregistry.registry.release_choice import nearest_release

# PEP 440 order, oldest first (tf-nightly writes its dev releases as 2.22.0-dev2026...)
ORDERED = ["2.9.3", "2.10.0", "2.10.1", "2.16.0.dev20240101", "2.16.0-dev20240202",
           "2.16.0a1", "2.16.0b2", "2.16.0rc0", "2.16.0rc1", "2.16.0", "2.16.0.post1",
           "2.16.1", "2.22.0-dev20261130", "2.22.0rc0", "2.22.0", "10.0.0"]


def test_versions_sort_in_pep440_order():
    assert sorted(reversed(ORDERED), key=version_key) == ORDERED


def test_the_order_is_packaging_s():
    version = pytest.importorskip("packaging.version")
    shuffled = ORDERED[::3] + ORDERED[1::3] + ORDERED[2::3]
    assert sorted(shuffled, key=version_key) == sorted(shuffled, key=version.Version)


def test_trailing_zeros_and_non_versions():
    assert version_key("2.9")[:5] == version_key("2.9.0")[:5]
    assert version_key("") < version_key("0.1")  # an op library without a version
    assert release_numbers("2.16.0rc1") == (2, 16, 0)
    assert release_numbers("2.22.0-dev20261130") == (2, 22, 0)


def test_nearest_release_reads_pre_releases_as_their_release():
    # 2.16.0rc1 is a 2.16.0 (patch 0), not a patch 1 newer than 2.16.0
    assert nearest_release("2.16.0rc1", ["2.16.0", "2.16.1"]) == "2.16.0"
    assert nearest_release("2.16.0", ["2.16.0rc1", "2.16.0rc0"]) == "2.16.0rc1"
    assert nearest_release("2.22.0-dev20261130", ["2.21.0", "2.23.0"]) == "2.21.0"
    assert nearest_release("2.18.0", ["2.15.1", "2.16.2", "2.20.0"]) == "2.16.2"
