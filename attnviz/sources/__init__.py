"""Token sources: text -> BPE tokens, images -> ViT patches, custom blocks (state, actions, noise).

numpy + Pillow + tokenizers only; no Qt, no numba, nothing else from attnviz.
"""
