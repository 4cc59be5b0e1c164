"""Temporary: the index stage moved to hydra_rag.index (removed once every caller uses it)."""

from hydra_rag.index import *  # noqa: F403
from hydra_rag.index import dry_run, index_folder  # noqa: F401
