"""Models: the local llama.cpp sidecars (one long-lived server per model on a loopback port,
started on demand and shared) and the clients that talk to them or to any OpenAI-compatible
endpoint: embeddings (embed.py, over a pool of servers: pool.py), chat completions (chat.py),
with the HTTP, key and crash handling they share (endpoint.py, sidecar.py; the key only the
owner's clients know and the gate that demands it: sidecar_key.py, sidecar_guard.py). Also
getting the shipped weights (install.py) and turning them into GGUF (convert_*.py).

Offers the stages above: connect() and EmbedClient, connect_chat() and stream_chat(), ensure()
for a sidecar, and the Tokenizer that sizes chunks and prompts.
"""
