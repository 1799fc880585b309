"""Token sources: text -> BPE tokens, images -> ViT patches, custom blocks (state, actions, noise).

numpy + Pillow + tokenizers only; no Qt, no numba, nothing else from attnviz.

Modules (imported one by one, so ``errors`` stays cheap to import):

* ``errors``       SourceError, the one error type of this layer, and shared argument checks
* ``text``         BpeTokenizer / TextTokens: ids, decoded pieces and character spans
* ``embedding``    EmbeddingTable: (vocab, d_model) rows, seeded or loaded
* ``image``        load_image, prepare_image (+ the patch names below, re-exported)
* ``patches``      Patches, patchify, unpatchify: row-major ViT patches and back
* ``patch_embed``  PatchEmbedder: z_0 = [x_class, x_p E ...] + E_pos
* ``custom``       CustomBlock, load_block_values: zeros, seeded noise or .npy/.csv rows
"""
