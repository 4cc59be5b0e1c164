"""Answering: a chat turn retrieves, builds the prompt with a delimited, numbered context
(prompt.py), streams the chat model's answer and checks its citations (citations.py); chats
are saved with the user's own words (sessions.py); a persona file becomes a bundle
(persona.py); the terminal REPL drives it all (repl.py).

Offers the front ends: Chat and TurnResult, the REPL, saved sessions.
"""
