"""Indexing: a folder's files walked and read (hydra_rag.read), chunked, embedded (hydra_rag.models)
and stored in `.hydra-index/` (hydra_rag.store), incrementally and crash-safely (run.py, a batch at
a time: batches.py); what an index holds against the folder now (status.py); a dry run; contextual
retrieval's situating sentences (contextualize.py); keeping indexes fresh as files change (watch.py,
and its systemd user unit, systemd.py).

Offers the front ends: index_folder, dry_run, folder_status/statuses and the reports.
"""

from hydra_rag.index.dry_run import dry_run
from hydra_rag.index.folder import index_folder
from hydra_rag.index.prepare import chunk_id, text_hash
from hydra_rag.index.report import DryRunReport, IndexInterrupted, IndexReport, Progress, ProgressFn
from hydra_rag.index.status import FileStatus, FolderStatus, folder_status, statuses
from hydra_rag.read.source import recorded_selection, resolve_root

__all__ = ["DryRunReport", "FileStatus", "FolderStatus", "IndexInterrupted", "IndexReport",
           "Progress", "ProgressFn", "chunk_id", "dry_run", "folder_status", "index_folder",
           "recorded_selection", "resolve_root", "statuses", "text_hash"]
