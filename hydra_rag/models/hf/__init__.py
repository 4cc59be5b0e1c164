"""Files from the Hugging Face hub: model names as people write them (refs.py) and verified,
resumable downloads through the hub's own client (download.py). Registering what was pulled
is hydra_rag.hub's."""
