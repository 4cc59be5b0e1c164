"""The on-disk index beside the files: `.hydra-index/` with its LanceDB tables, meta.yaml and
generations (index_dir.py), the record of indexed files (filelist.py: files.db), rebuilding
beside the live index (rebuild.py), the full-text column's analysis (lexical.py) and the
machine's registry of indexed folders (registry.py).

Offers the stages above: Store, FileList and FileEntry, Analysis, the rebuild steps and the
registry. Knows nothing of embedding or searching.
"""
