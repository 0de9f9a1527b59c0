"""ingestion-service: extract, chunk, embed and write documents into the shared Qdrant collection."""

# Builds the error table, which the errors' code, status_code and detail() read, before any module
# can raise one (errors.py cannot import it: the table imports the error classes).
from ingestion_service import error_table as _error_table  # noqa: F401

__all__: list[str] = []
