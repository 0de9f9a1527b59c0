"""Sources the server keeps in step with a collection: a file or URL, a website, a folder, an S3 prefix
(registered through ``/api/v1/sources``, synced with ``rag sync``'s add/change/remove rules)."""

__all__: list[str] = []
