"""pytest helpers: a test fails when a guarded block loses a gradient.

With opregistry installed, pytest loads this module as a plugin (entry point
``pytest11``), which gives the fixture ``gradient_guard`` and the marker
``@pytest.mark.gradient_guard``::

    def test_training(gradient_guard):  # any gradient lost in the test fails it
        model.fit(x, y)

``gradient_guard`` is the Guard (``gradient_guard.lost``); ignores go through the
marker: ``@pytest.mark.gradient_guard(ignore={"frozen/*": "frozen on purpose"})``.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "gradient_guard(ignore=None, release=None): fail the test when a "
        "gradient goes missing in it (opregistry.guard)")


@pytest.fixture
def gradient_guard(request: Any) -> Iterator[Any]:
    """Guard the test (action ``log``); the test fails listing what was lost."""
    from opregistry.guard import Guard

    marker = request.node.get_closest_marker("gradient_guard")
    options = dict(marker.kwargs) if marker else {}
    guard = Guard("log", summary=False, **options)
    request.node._opregistry_guard = guard
    with guard:
        yield guard


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    """After the test body, while its guard is still on: a lost gradient fails it (a
    failure of the test, not an error of its teardown)."""
    result = yield
    guard = getattr(item, "_opregistry_guard", None)
    if guard is not None and guard.lost:
        pytest.fail("gradients lost in this test:\n" +
                    "\n".join(lost.message() for lost in guard.lost), pytrace=False)
    return result


@pytest.fixture(autouse=True)
def _gradient_guard_marker(request: Any) -> Iterator[None]:
    """``@pytest.mark.gradient_guard`` on a test: the fixture, without naming it."""
    if request.node.get_closest_marker("gradient_guard") is None or \
            "gradient_guard" in request.fixturenames:
        yield
        return
    request.getfixturevalue("gradient_guard")
    yield
