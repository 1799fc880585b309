"""Token sources: text -> BPE tokens, images -> ViT patches, custom blocks (state, actions, noise).

numpy + Pillow + tokenizers only (no Qt, numba or other attnviz layer). Modules are imported one by
one so ``errors`` stays cheap: ``errors`` (SourceError), ``text``, ``embedding``, ``image``,
``patches``, ``patch_embed``, ``custom``.
"""
