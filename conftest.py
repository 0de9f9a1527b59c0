"""What every test root shares: the ``models`` marker on each test that loads the offline models.

A test that uses a root's ``embedder`` fixture (directly or through an app or a seeded store) is
marked here; one that builds a model-loading app or embedder itself carries ``pytest.mark.models``
in its module. ``make test-fast`` runs ``-m "not models"``.
"""

from __future__ import annotations

import pytest

# The session fixture each test root loads its models in; every app and seeded store depends on it.
MODEL_FIXTURES = frozenset({"embedder"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)
