"""``rag sync``: keep a folder or an S3 bucket prefix in step with one knowledge base.

Identity rules (they decide what "the same document" means, so changing them orphans documents):

- The source's ``root_uri`` is ``file:///abs/folder`` (``Path.resolve().as_uri()``) or
  ``s3://bucket/prefix``, normalised without a trailing slash.
- A synced file's ``file_id`` is ``uuid5(NAMESPACE_URL, f"{root_uri}/{relative_posix_path}")``, so the
  same folder synced again maps to the same documents. For a path that needs no percent-encoding
  this is also the id ``rag ingest`` gives the file, so a folder ingested before is adopted, not
  duplicated.
- Every document sync writes carries ``attributes = {"sync_source": root_uri, "sync_path":
  relative_path}``. "Removed" is computed only among the knowledge base's documents whose
  ``attributes.sync_source`` equals this root: documents others put in the knowledge base (Open
  WebUI uploads, other folders, other prefixes) are never deleted.

What is compared (against ``GET /api/v1/documents``; nothing is uploaded for an unchanged file):

- Folder: every file under the root, recursively, hidden files and folders skipped (as ``rag
  ingest`` does). Unchanged = the listing's ``content_hash`` equals the file's sha256 (hashed,
  streamed, in worker threads). Changed = same ``file_id``, different hash. New = ``file_id`` not listed.
- S3: every object under the prefix (``list_objects_v2``), folder markers (keys ending in "/") and
  hidden names skipped. Unchanged = the listing's ``s3_key`` and ``s3_etag`` equal the object's, so
  the object is not even read; otherwise the service is asked to ingest it by key (JSON mode).
- Either way a listed document must also carry this root's marks to count as unchanged (an adopted
  ``rag ingest`` document is sent once so it gets them), and a file sent that the service answers
  ``unchanged: true`` (same bytes under the same settings: nothing re-embedded) counts as unchanged.
- ``force`` sends every file with ``force=true`` (the service re-extracts and re-embeds).

A failure (HTTP error, unreadable file, failed delete) is collected with its error text and does not
stop the others; a file that could not be read is never taken for removed.
"""
