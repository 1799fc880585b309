"""Chat templates of decoder checkpoints: rendered as transformers' apply_chat_template, in a sandbox.

The goldens ``golden_chat.npz`` come from tools/make_decoder_goldens.py: ``input_ids`` from
``tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
add_generation_prompt=True)`` and transformers' eager attention on them.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints import decoder_chat
from attnviz.checkpoints.decoder_run import count_tokens, run_decoder


@pytest.mark.parametrize("name, source", [("tiny_qwen2", "chat_template.jinja"),
                                          ("tiny_llama", "tokenizer_config.json chat_template 'default'")])
def test_chat_ids_and_attention_match_transformers(name, source):
    g = golden(DATA / name / "golden_chat.npz")
    ck = load_checkpoint(DATA / name)
    assert ck.special_tokens.has_chat_template and ck.special_tokens.chat.source == source
    for mode in ("weights", "qk"):
        res = run_decoder(ck, str(g["text"]), chat=True, mode=mode)
        np.testing.assert_array_equal(res.ids, g["input_ids"])  # the template's BOS only, never a second one
        for layer in range(g["attentions"].shape[0]):
            for head in range(g["attentions"].shape[1]):
                np.testing.assert_allclose(res.head_map(layer, head), g["attentions"][layer, head], atol=1e-5, rtol=0)
    assert res.chat and count_tokens(ck, str(g["text"]), chat=True) == len(g["input_ids"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


def test_chatml_markers_are_single_special_tokens():
    res = run_decoder(load_checkpoint(DATA / "tiny_qwen2"), "the rain", chat=True)
    assert res.tokens[0] == "<|im_start|>" and res.special[0]
    assert res.tokens.count("<|im_end|>") == 1 and res.tokens[-2:] == ["assistant", "\n"] or res.tokens[-1] == "\n"
    assert int(res.special.sum()) == 3  # <|im_start|> user ... <|im_end|> <|im_start|> assistant


def test_llama_template_brings_its_own_bos_once():
    ck = load_checkpoint(DATA / "tiny_llama")
    plain, chat = run_decoder(ck, "the rain"), run_decoder(ck, "the rain", chat=True)
    assert plain.ids[0] == chat.ids[0] == ck.special_tokens.bos_id
    assert (chat.ids == ck.special_tokens.bos_id).sum() == 1


def test_a_model_without_a_template_says_so():
    ck = load_checkpoint(DATA / "tiny_qwen3")
    assert not ck.special_tokens.has_chat_template
    with pytest.raises(CheckpointError, match="tiny_qwen3 has no chat template"):
        run_decoder(ck, "the rain", chat=True)


def _with_template(tmp_path, template, name="tiny_qwen2"):
    d = tmp_path / "ck"
    shutil.copytree(DATA / name, d)
    (d / "chat_template.jinja").write_text(template, encoding="utf-8")
    return load_checkpoint(d)


@pytest.mark.parametrize("template, expected", [
    ("{% for m in messages %}{{ m.content }", r"chat_template\.jinja\) has a syntax error on line 1"),
    ("{{ raise_exception('only system turns here') }}", r"refused the input: only system turns here"),
    ("{{ messages.__class__.__mro__ }}", r"refused by the sandbox: access to attribute '__class__'"),
    ("{{ ''.__class__ }}", r"refused by the sandbox: access to attribute '__class__'"),
    ("{% set ns = namespace(__dict__=1) %}x", r"refused by the sandbox: a namespace attribute may not start with '_'"),
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}x",
     r"was stopped: it ran more than 250,000 steps"),
    ("{% set s = 'x' * 1000 %}{% for a in range(100000) %}{% for b in range(100000) %}{{ s }}{% endfor %}{% endfor %}",
     r"was stopped: it grew past 1,048,\d+ characters"),
    ("{{ 'x' * 10**12 }}", r"refused by the sandbox: a repetition of 1,000,000,000,000 items"),
    ("{{ 7 ** (10 ** 12) }}", r"refused by the sandbox: 7 \*\* 1000000000000 is too large"),
    ("{{ range(10**7) | list }}", r"failed to render: Range too big"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", r"(stopped|failed to render)"),
    ("{{ messages[0].content.upper() }}{{ messages.append(1) }}", r"refused by the sandbox"),
    # values made large out of small ones: refused before they are made, or stopped at the next step
    ("{{ 'x' | center(300000000) }}", r"center with a width of 300,000,000 items is larger"),
    ("{{ 'x'.ljust(300000000) }}", r"str.ljust with a width of 300,000,000"),
    ("{{ '%0300000000d' % 1 }}", r"a format width of a million or more is refused"),
    ("{{ '%*d' % (300000000, 1) }}", r"a format width of a million or more is refused"),
    ("{{ '{:>300000000}'.format(1) }}", r"a format width of a million or more is refused"),
    ("{{ '{:>{}}'.format(1, 300000000) }}", r"str.format with a width of 300,000,000"),
    ("{{ '%0300000000d' | format(1) }}", r"a format width of a million or more is refused"),
    ("{% set s = 'x' * 1000000 %}{{ s | replace('x', 'yyyy') }}", r"replace of 4,000,000 items"),
    ("{% set s = 'x' * 1000000 %}{{ s.replace('x', 'yyyy') }}", r"str.replace of 4,000,000 items"),
    ("{% set s = 'x' * 1000000 %}{{ [s, s] | join }}", r"join of 2,000,000 items"),
    ("{% set s = 'x' * 1000000 %}{{ ''.join([s, s]) }}", r"str.join of 2,000,000 items"),
    ("{% set s = 'x' * 1000000 %}{{ (s + s) | length }}", r"a concatenation of 2,000,000 items"),
    ("{% set s = 'x' * 1000000 %}{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}{{ s | length }}",
     r"was stopped: a value grew to 2,000,000 items"),
    ("{% set ns = namespace(s='x' * 1000000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     r"a namespace value of 2,000,000 items"),
    ("{% set s = 'x\n' * 500000 %}{{ s | indent(1000) }}", r"indent of 501,001,000 items"),
    ("{{ messages | tojson(indent=300000000) }}", r"a tojson indent of 300,000,000 items"),
])
def test_hostile_templates_get_a_message_naming_the_template(tmp_path, template, expected):
    ck = _with_template(tmp_path, template)
    with pytest.raises(CheckpointError, match=r"ck: the chat template \(chat_template\.jinja\).*" if "syntax" not in expected
                       else "ck: the chat template"):
        run_decoder(ck, "the rain", chat=True)
    with pytest.raises(CheckpointError, match=expected):
        run_decoder(ck, "the rain", chat=True)


def test_a_template_rendering_nothing_or_too_much_for_the_context(tmp_path):
    with pytest.raises(CheckpointError, match="rendered nothing"):
        run_decoder(_with_template(tmp_path / "a", "{% if false %}x{% endif %}"), "the rain", chat=True)
    long = "{% for i in range(100) %}{{ messages[0].content }} {% endfor %}"
    with pytest.raises(CheckpointError, match=r"in the chat template, more than the limit of 64;.*context of 64 tokens"):
        run_decoder(_with_template(tmp_path / "b", long), "the rain", chat=True)


def test_named_templates_use_the_default_one(tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_llama", d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    names = [t["name"] for t in cfg["chat_template"]]
    assert names == ["default", "tool_use"]
    cfg["chat_template"] = [t for t in cfg["chat_template"] if t["name"] != "default"] + [
        {"name": "other", "template": "{{ 'x' }}"}]
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"chat templates named other, tool_use, none of them 'default'"):
        run_decoder(load_checkpoint(d), "the rain", chat=True)
    cfg["chat_template"] = 7
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="must be a string or a list"):
        run_decoder(load_checkpoint(d), "the rain", chat=True)
    # a chat_template.jinja takes the place of the config's templates, as in transformers
    (d / "chat_template.jinja").write_text("{{ bos_token }}{{ eos_token }}{{ messages[0]['content'] }}")
    res = run_decoder(load_checkpoint(d), "the rain", chat=True)
    assert res.tokens[:2] == ["<s>", "</s>"]


def test_rendering_restores_the_trace_function():
    import sys

    def tracer(frame, event, arg):
        return None

    ck = load_checkpoint(DATA / "tiny_qwen2")
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        decoder_chat.render_chat(ck.special_tokens.chat, "the rain", "tiny_qwen2")
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(old)


def test_cli_inspect_chat_writes_the_chat_tokens_and_maps(tmp_path, capsys):
    from attnviz.cli import main

    g = golden(DATA / "tiny_qwen2" / "golden_chat.npz")
    out = tmp_path / "chat.npz"
    assert main(["model", "inspect", str(DATA / "tiny_qwen2"), "--text", str(g["text"]), "--chat", "--npz", str(out)]) == 0
    assert "in the chat template of chat_template.jinja" in capsys.readouterr().out
    with np.load(out) as z:
        np.testing.assert_array_equal(z["ids"], g["input_ids"])
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("model, expected", [("tiny_qwen3", "tiny_qwen3 has no chat template"),
                                             ("tiny_gpt2", "--chat is for decoder LLMs given --text")])
def test_cli_chat_refusals(tmp_path, capsys, model, expected):
    from attnviz.cli import main

    assert main(["model", "inspect", str(DATA / model), "--text", "the rain", "--chat", "--npz",
                 str(tmp_path / "o.npz")]) == 1
    assert expected in capsys.readouterr().err and not (tmp_path / "o.npz").exists()


def test_cli_hostile_template_is_one_line_not_a_traceback(tmp_path, capsys):
    from attnviz.cli import main

    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_qwen2", d)
    (d / "chat_template.jinja").write_text("{{ cycler.__init__.__globals__ }}")
    assert main(["model", "inspect", str(d), "--text", "the rain", "--chat", "--npz", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err
    assert "the chat template (chat_template.jinja) was refused by the sandbox" in err and "Traceback" not in err


def _template_cases():
    with open(DATA / "chat_templates.json", encoding="utf-8") as fh:
        return sorted(json.load(fh).items())


@pytest.mark.parametrize("name, case", _template_cases())
def test_environment_renders_and_tokenises_as_transformers(name, case):
    """Whitespace control, namespace, macros, loop controls, tojson (no HTML escaping, non-ASCII kept)."""
    from dataclasses import replace

    from attnviz.checkpoints.decoder_text import encode

    ck = load_checkpoint(DATA / "tiny_qwen2")
    template = replace(ck.special_tokens.chat, source=name, text=case["template"])
    assert decoder_chat.render_chat(template, case["text"], "tiny_qwen2") == case["rendered"]
    toks = encode(ck.tokenizer, replace(ck.special_tokens, chat=template), case["text"], 10**6, chat=True)
    assert toks.text == case["rendered"]
    np.testing.assert_array_equal(toks.ids, case["input_ids"])


def test_template_files_of_a_folder_as_transformers_reads_them(tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_qwen3", d)
    (d / "additional_chat_templates").mkdir()
    (d / "additional_chat_templates" / "tool_use.jinja").write_text("{{ 'tools' }}")
    ck = load_checkpoint(d)
    assert ck.special_tokens.has_chat_template
    with pytest.raises(CheckpointError, match=r"\(additional_chat_templates/tool_use\.jinja\) cannot be used: "
                                              r"chat templates named tool_use, none of them 'default'"):
        run_decoder(ck, "the rain", chat=True)
    (d / "chat_template.jinja").write_bytes(b"{{ messages[0]['content'] }}\xff")
    with pytest.raises(CheckpointError, match=r"chat_template\.jinja is not readable UTF-8 text"):
        run_decoder(load_checkpoint(d), "the rain", chat=True)
    (d / "chat_template.jinja").write_text("<|endoftext|>{{ messages[0]['content'] }}")
    res = run_decoder(load_checkpoint(d), "the rain", chat=True)
    assert res.tokens[0] == "<|endoftext|>" and res.special[0] and res.chat


@pytest.mark.parametrize("template, expected", [
    # a width passed as a string to format / format_map: the allocation fails inside the capped child
    ("{{ '{:{}}'.format('', '1500000000') | length }}", r"was stopped: it needed more than 512 MiB"),
    ("{{ '{x:{w}}'.format_map({'x': '', 'w': '1500000000'}) | length }}", r"was stopped: it needed more than"),
    # big-integer work the step budget cannot see: stopped by the CPU limit
    ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}{{ 1 }}",
     r"was stopped: it (used more than 5 s of CPU time|ran longer than)"),  # the deadline on a busy machine
    # deeper nesting than Python compiles: a message, not a raw SyntaxError
    ("".join("{%% for a%d in [1] %%}" % i for i in range(25)) + "x" + "{% endfor %}" * 25,
     r"does not compile: too many statically nested blocks"),
])
def test_templates_the_sandbox_cannot_bound_are_stopped_as_a_whole(tmp_path, template, expected):
    import time

    ck = _with_template(tmp_path, template)
    t0 = time.monotonic()
    with pytest.raises(CheckpointError, match=expected):
        run_decoder(ck, "the rain", chat=True)
    assert time.monotonic() - t0 < decoder_chat.RENDER_SECONDS + 6


def test_a_huge_template_inside_tokenizer_config_is_refused_unrendered(tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_qwen2", d)
    (d / "chat_template.jinja").unlink(missing_ok=True)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{{ messages[0].content }}" + " " * (decoder_chat.TEMPLATE_MAX_BYTES + 1)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    ck = load_checkpoint(d)
    with pytest.raises(CheckpointError, match=r"bytes, more than the 1,048,576 a chat template may have"):
        run_decoder(ck, "the rain", chat=True)


def test_without_fork_the_render_runs_in_process_with_the_same_answers(monkeypatch):
    ck = load_checkpoint(DATA / "tiny_qwen2")
    forked = decoder_chat.render_chat(ck.special_tokens.chat, "the rain", "tiny_qwen2")
    monkeypatch.delattr(decoder_chat.os, "fork")
    assert decoder_chat.render_chat(ck.special_tokens.chat, "the rain", "tiny_qwen2") == forked
