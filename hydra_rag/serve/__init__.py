"""Serving hydra-rag to other programs: an MCP server for agents and editors, an
OpenAI-compatible HTTP endpoint and a web chat, all over one Scope of indexed folders."""
