"""The contract's semantic version.

A major bump means data written under the old major cannot be read correctly under the new one
(vector layout, payload keys, embedding text). Services refuse a collection whose manifest has
another major version.
"""

CONTRACT_VERSION = "2.4.1"


def major_version(version: str) -> int:
    """The major component of a ``MAJOR.MINOR.PATCH`` version string."""
    return int(version.split(".", 1)[0])
