"""Write ``tests/data/checkpoints/tiny_llava_mixtral``: LLaVA whose language model is Mixtral (a sparse mixture of
experts, top-2 of 4 routed SwiGLU experts, a sliding window), with transformers' eager attention as its golden.

Run once, in the throw-away environment of tools/make_vlm_goldens.py (whose helpers it uses):

    /tmp/gold/bin/python tools/make_llava_mixtral_golden.py

``golden.npz`` as make_vlm_goldens.py writes it (prompt, input_ids, pixel_values, attentions (L, nh, T, T),
last_hidden_state; LlavaForConditionalGeneration returns no router logits), and ``golden_generate.npz`` as
tools/make_vlm_generate_goldens.py writes it (greedy ids, each step's probabilities, the final sequence's maps).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from PIL import Image
from tokenizers import pre_tokenizers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_vlm_goldens import (LLAVA_PROMPT, fresh, randomise, save_golden, stack_attentions, test_image,  # noqa: E402
                              train_bpe)


def make_llava_mixtral() -> None:
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaTokenizer, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor, MixtralConfig)

    out = fresh("tiny_llava_mixtral")
    vocab, merges = train_bpe(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                              ["<unk>", "<s>", "</s>", "<pad>"], 200)
    tok = LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tok.pad_token = "<pad>"
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                              image_size=24, patch_size=8, projection_dim=16, hidden_act="quick_gelu")
    text = MixtralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         num_local_experts=4, num_experts_per_tok=2, sliding_window=64, rope_theta=10000.0,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                      vision_feature_layer=-1, vision_feature_select_strategy="default",
                      projector_hidden_act="gelu", image_seq_length=9)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(cfg).eval()
    randomise(model, 5)
    ip = CLIPImageProcessorPil(size={"shortest_edge": 24}, crop_size={"height": 24, "width": 24})
    proc = LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                          num_additional_image_tokens=1)
    model.save_pretrained(out, safe_serialization=True)
    proc.save_pretrained(out)
    Image.fromarray(test_image(36, 28, seed=4)).save(out / "image.png")
    batch = proc(images=Image.open(out / "image.png"), text=LLAVA_PROMPT, return_tensors="pt")
    model.config._attn_implementation = "eager"
    model.model.language_model.config._attn_implementation = "eager"
    with torch.no_grad():
        res = model(**batch, output_attentions=True, output_hidden_states=True)
    save_golden(out / "golden.npz", prompt=LLAVA_PROMPT, input_ids=batch["input_ids"][0],
                pixel_values=batch["pixel_values"][0], attentions=stack_attentions(res.attentions),
                last_hidden_state=res.hidden_states[-1][0].float())
    print("tiny_llava_mixtral:", batch["input_ids"].shape, stack_attentions(res.attentions).shape)


if __name__ == "__main__":
    make_llava_mixtral()
    from make_vlm_generate_goldens import DATA, golden as generate_golden

    torch.manual_seed(0)
    generate_golden(DATA / "tiny_llava_mixtral")
