"""A decoder checkpoint's chat template: found as transformers finds it, rendered in a jinja2 sandbox.

Where the template comes from (the order of transformers' tokenizer loading): ``chat_template.jinja``
(the "default" template) and ``additional_chat_templates/NAME.jinja`` (named ones) when present,
else ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of ``{"name", "template"}``).
Of named templates the one called "default" is used (none called so: refused, as transformers does).

:func:`render_chat` renders it for one user message (``messages=[{"role": "user", "content": TEXT}]``,
``add_generation_prompt=True``, the tokenizer's named special tokens ``bos_token``, ``eos_token``, …)
as ``tokenizer.apply_chat_template`` does.  Templates are untrusted input: they run in
:class:`jinja2.sandbox.ImmutableSandboxedEnvironment` (no underscore attributes, no mutation of the
values passed in, ranges of at most 100,000 items), and on top of it

* every line the template's code executes is counted, and a render past :data:`STEP_BUDGET` steps
  stops (nested loops are not bounded by the sandbox's range limit);
* the rendered text is capped (:func:`output_cap`): a render is stopped as soon as it grows past it;
* ``*`` repeating a string or list, and ``**`` on integers, refuse results larger than that cap;
* access to an unsafe attribute (``__class__`` and other underscore names) is an error, not an empty
  value.

Any failure (a syntax error, ``raise_exception(...)`` in the template, a refused attribute, a budget
crossed) is a :class:`CheckpointError` naming the checkpoint and the template.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError

TEMPLATE_MAX_BYTES = 1 << 20  # a template file (real ones are a few KiB)
STEP_BUDGET = 1_000_000  # executed template lines per render (one message renders in a few thousand)
OUTPUT_EXTRA = 1 << 20  # characters a render may add to twice the user's text
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
DEFAULT_SPECIAL = {"llama": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
                   "mistral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}}


@dataclass(frozen=True)
class ChatTemplate:
    """The template a checkpoint's tokenizer would use, where it was found, and the token variables."""

    source: str  # e.g. "chat_template.jinja" or "tokenizer_config.json chat_template 'default'"
    text: str | None  # None when it cannot be used (``problem`` says why)
    variables: tuple[tuple[str, str], ...] = ()  # (bos_token, "<s>"), ...
    problem: str = ""


def output_cap(text: str) -> int:
    """Most characters a rendered chat of ``text`` may hold."""
    return 2 * len(text) + OUTPUT_EXTRA


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > TEMPLATE_MAX_BYTES:
            raise CheckpointError(f"{path.name} is {path.stat().st_size:,} bytes, more than the "
                                  f"{TEMPLATE_MAX_BYTES:,} a chat template may have")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path.name} is not readable UTF-8 text ({type(exc).__name__})") from None


def _token_text(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def template_variables(folder: Path, cfg: dict, model_type: str) -> tuple[tuple[str, str], ...]:
    """The named special tokens a template sees: tokenizer_config.json, then special_tokens_map.json,
    then the family's defaults (Llama / Mistral: ``<s>``, ``</s>``, ``<unk>``); unset ones are absent."""
    smap: dict = {}
    path = folder / "special_tokens_map.json"
    if path.is_file():
        try:
            loaded = json.loads(_read_text(path))
            smap = loaded if isinstance(loaded, dict) else {}
        except (CheckpointError, json.JSONDecodeError, RecursionError):
            smap = {}
    out = []
    for name in SPECIAL_NAMES:
        if name in cfg:
            value = _token_text(cfg[name])
        elif name in smap:
            value = _token_text(smap[name])
        else:
            value = DEFAULT_SPECIAL.get(model_type, {}).get(name)
        if value is not None:
            out.append((name, value))
    return tuple(out)


def find_template(folder: Path, cfg: dict, model_type: str) -> ChatTemplate | None:
    """The chat template of a checkpoint folder (None when it has none)."""
    named: dict[str, str] = {}
    sources: dict[str, str] = {}
    try:
        if (folder / "chat_template.jinja").is_file():
            named["default"] = _read_text(folder / "chat_template.jinja")
            sources["default"] = "chat_template.jinja"
        extra = folder / "additional_chat_templates"
        if extra.is_dir():
            for f in sorted(extra.glob("*.jinja")):
                named[f.name.removesuffix(".jinja")] = _read_text(f)
                sources[f.name.removesuffix(".jinja")] = f"additional_chat_templates/{f.name}"
    except CheckpointError as exc:
        return ChatTemplate(source="chat_template.jinja", text=None, problem=str(exc))
    variables = template_variables(folder, cfg, model_type)
    if not named:
        value = cfg.get("chat_template")
        if value is None:
            return None
        where = "tokenizer_config.json chat_template"
        if isinstance(value, str):
            return ChatTemplate(source=where, text=value, variables=variables)
        if not isinstance(value, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                  and isinstance(t.get("template"), str) for t in value):
            return ChatTemplate(source=where, text=None, problem=f"{where} must be a string or a list of "
                                                                 '{"name": ..., "template": ...} objects')
        named = {t["name"]: t["template"] for t in value}
        sources = {n: f"{where} {n!r}" for n in named}
    if "default" not in named:  # transformers refuses to choose among named templates without a default
        return ChatTemplate(source=", ".join(sources.values()) or "tokenizer_config.json chat_template", text=None,
                            problem=f"chat templates named {', '.join(sorted(named)) or '(none)'}, none of them 'default'")
    return ChatTemplate(source=sources["default"], text=named["default"], variables=variables)


class _Stop(BaseException):
    """Raised inside a render that crossed a budget (a BaseException: template code cannot catch it)."""


class _StepCounter:
    """A trace function counting executed lines of the rendering thread; raises past the budget."""

    def __init__(self, steps: int):
        self.left = steps

    def __call__(self, frame, event, arg):
        return self.local

    def local(self, frame, event, arg):
        self.left -= 1
        if self.left < 0:
            raise _Stop(f"it ran more than {STEP_BUDGET:,} steps")
        return self.local


def _environment(cap: int):
    """A sandboxed jinja2 environment with the globals and filters chat templates expect."""
    import jinja2.ext
    from jinja2.exceptions import SecurityError, TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    class ChatEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def unsafe_undefined(self, obj, attribute):
            raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} is refused")

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > cap:
                        raise SecurityError(f"a repetition of {len(seq) * n:,} items is larger than the "
                                            f"{cap:,} characters a rendered chat may have")
            if operator == "**" and isinstance(left, int) and isinstance(right, int):
                if abs(right) * max(1, abs(left).bit_length()) > 8 * cap:
                    raise SecurityError(f"{left} ** {right} is too large a number")
            return super().call_binop(context, operator, left, right)

    class ChatNamespace(Namespace):
        def __init__(*args, **kwargs):  # noqa: N805  (jinja2's Namespace takes self among *args too)
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key in attrs:
                ChatNamespace._check(key)
            Namespace.__init__(self, attrs)

        def __setitem__(self, key, value):
            ChatNamespace._check(key)
            Namespace.__setitem__(self, key, value)

        @staticmethod
        def _check(key):
            if isinstance(key, str) and key.startswith("_"):
                raise SecurityError(f"a namespace attribute may not start with '_' ({key!r})")

    def raise_exception(message):
        raise TemplateError(str(message))

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ChatEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(str(fmt))
    env.globals["namespace"] = ChatNamespace
    env.globals["dict"] = lambda *a, **k: dict(*a, **k)
    return env


def render_chat(template: ChatTemplate, text: str, model: str) -> str:
    """The template rendered for one user message ``text`` with the generation prompt."""
    where = f"{model}: the chat template ({template.source})"
    if template.text is None:
        raise CheckpointError(f"{where} cannot be used: {template.problem}")
    try:
        from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError
    except ImportError:
        raise CheckpointError("chat templates need the jinja2 package (pip install 'jinja2>=3.1.6')") from None

    cap = output_cap(text)
    env = _environment(cap)
    try:
        compiled = env.from_string(template.text)
    except TemplateSyntaxError as exc:
        raise CheckpointError(f"{where} has a syntax error on line {exc.lineno}: {exc.message}") from None
    except (TemplateError, RecursionError, MemoryError, ValueError) as exc:
        raise CheckpointError(f"{where} does not compile: {exc} ({type(exc).__name__})") from None
    args = dict(template.variables)
    args.update(messages=[{"role": "user", "content": text}], tools=None, documents=None, add_generation_prompt=True)
    counter = _StepCounter(STEP_BUDGET)
    previous = sys.gettrace()
    parts: list[str] = []
    size = 0
    sys.settrace(counter)
    try:
        for chunk in compiled.generate(**args):
            size += len(chunk)
            if size > cap:
                raise _Stop(f"it grew past {cap:,} characters (twice the text plus {OUTPUT_EXTRA:,})")
            parts.append(chunk)
    except _Stop as exc:
        raise CheckpointError(f"{where} was stopped: {exc}") from None
    except SecurityError as exc:
        raise CheckpointError(f"{where} was refused by the sandbox: {exc}") from None
    except TemplateError as exc:
        raise CheckpointError(f"{where} refused the input: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (untrusted code: any failure is the template's, reported as such)
        raise CheckpointError(f"{where} failed to render: {exc} ({type(exc).__name__})") from None
    finally:
        sys.settrace(previous)
    return "".join(parts)
