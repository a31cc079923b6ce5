"""Workspace content in a content-addressed blob store, shared by every host on one database.

``base`` (the ``BlobStore`` protocol, manifest records, errors), ``directory`` (blobs as files),
``s3`` (an S3-compatible object store through obstore, loaded only when chosen), ``sync`` (a
host's materialized copies: refresh, plan, publish). The PostgreSQL backend and every SQL
statement live in ``fleet_core.store.content``. See docs/storage.md.
"""
