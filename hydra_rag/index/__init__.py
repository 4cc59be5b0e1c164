"""The index stage: a folder's files walked, read (documents extracted), chunked, embedded and
stored in `.hydra-index/`, incrementally and crash-safely (see run.py)."""

from hydra_rag.index.prepare import chunk_id, text_hash
from hydra_rag.index.report import DryRunReport, IndexInterrupted, IndexReport, Progress, ProgressFn
from hydra_rag.index.run import index_folder
from hydra_rag.index.source import dry_run, recorded_selection, resolve_root
from hydra_rag.index.status import FileStatus, FolderStatus, folder_status, statuses

__all__ = ["DryRunReport", "FileStatus", "FolderStatus", "IndexInterrupted", "IndexReport",
           "Progress", "ProgressFn", "chunk_id", "dry_run", "folder_status", "index_folder",
           "recorded_selection", "resolve_root", "statuses", "text_hash"]
