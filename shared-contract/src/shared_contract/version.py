"""The contract's semantic version.

A major bump means data written under the old major cannot be read correctly under the new one
(vector layout, payload keys, embedding text), or that old writers would break what new readers
rely on. Services refuse a collection whose manifest has another major version, except the older
majors in READABLE_OLDER_MAJORS, which they read and write as those majors did.
"""

from typing import Final

CONTRACT_VERSION = "3.3.0"

# 3.0 added ``meta.live_in``, which every writer sets on committed points and search filters on
# alone. A 2.x store holds points without it, so 3.x services serve it with 2.x's filters.
READABLE_OLDER_MAJORS: Final = frozenset({2})


def major_version(version: str) -> int:
    """The major component of a ``MAJOR.MINOR.PATCH`` version string."""
    return int(version.split(".", 1)[0])
