"""A decoder checkpoint's chat template: found as transformers finds it, rendered in a jinja2 sandbox.

Templates are untrusted input: on top of :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` a
render is bounded in executed lines (:data:`STEP_BUDGET`; the sandbox does not bound nested loops),
in output and in the size of every value it builds (:func:`output_cap`), and an unsafe attribute is an
error, not an empty value. Where the system can fork, the render runs in a child process with its CPU
time and memory capped (RENDER_SECONDS, RENDER_MEMORY) and a wall-clock deadline: what the checks above
cannot see (big-integer arithmetic, a width passed as a string to ``format``) is stopped there as a
whole. Every failure is a :class:`CheckpointError` naming checkpoint and template.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError
from attnviz.jsontext import DEFAULT_MAX_DEPTH, JsonRefused, loads_guarded

TEMPLATE_MAX_BYTES = 1 << 20  # a template file (real ones are a few KiB)
STEP_BUDGET = 250_000  # executed lines per render (one message in a ChatML template takes about 200)
OUTPUT_EXTRA = 1 << 20  # characters a render may add to twice the user's text
RENDER_SECONDS = 5  # CPU seconds a render may use (its child process is stopped past them)
RENDER_MEMORY = 512 << 20  # bytes of memory a render may add to the process it was forked from
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
            loaded = loads_guarded(_read_text(path), max_depth=DEFAULT_MAX_DEPTH)
            smap = loaded if isinstance(loaded, dict) else {}
        except (CheckpointError, JsonRefused, json.JSONDecodeError, RecursionError):
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
    """The chat template of a checkpoint folder (None when it has none), in transformers' loading order.

    ``chat_template.jinja`` and ``additional_chat_templates/NAME.jinja`` first, else tokenizer_config's
    ``chat_template`` (a string or a list of ``{"name", "template"}``); of named ones "default" is used.
    """
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
        texts = [value] if isinstance(value, str) else [t.get("template") for t in value if isinstance(t, dict)] \
            if isinstance(value, list) else []
        big = max((len(t.encode("utf-8", "surrogatepass")) for t in texts if isinstance(t, str)), default=0)
        if big > TEMPLATE_MAX_BYTES:
            return ChatTemplate(source=where, text=None, problem=f"{where} is {big:,} bytes, more than the "
                                                                 f"{TEMPLATE_MAX_BYTES:,} a chat template may have")
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


_WIDE_FORMAT = re.compile(r"%[^a-zA-Z%]*(\d{7,}|\*)|\{[^{}]*\d{7,}")  # a field width of a million or more


def _size(value) -> int:
    """Length of a string / list / tuple / dict (0 for anything else)."""
    return len(value) if isinstance(value, (str, list, tuple, dict)) else 0


class _Stop(BaseException):
    """Raised inside a render that crossed a budget (a BaseException: template code cannot catch it)."""


class _StepCounter:
    """A trace function counting executed lines of the rendering thread (raises past the budget), and
    measuring the variables of the template's own code at each of its lines (raises past ``cap``)."""

    def __init__(self, steps: int, cap: int):
        self.left = steps
        self.cap = cap

    def __call__(self, frame, event, arg):
        return self.template_line if frame.f_code.co_filename == "<template>" else self.line

    def line(self, frame, event, arg):
        self.left -= 1
        if self.left < 0:
            raise _Stop(f"it ran more than {STEP_BUDGET:,} steps")
        return self.line

    def template_line(self, frame, event, arg):
        self.line(frame, event, arg)
        for value in frame.f_locals.values():
            if _size(value) > self.cap:
                raise _Stop(f"a value grew to {_size(value):,} items, past the {self.cap:,} a rendered chat may have")
        return self.template_line


def _environment(cap: int):
    """A sandboxed jinja2 environment with the globals and filters chat templates expect."""
    import jinja2
    import jinja2.ext
    from jinja2.exceptions import SecurityError, TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    def limit(n: int, what: str) -> None:
        if n > cap:
            raise SecurityError(f"{what} of {n:,} items is larger than the {cap:,} characters a rendered chat may have")

    def check_format(fmt) -> None:
        if isinstance(fmt, str) and _WIDE_FORMAT.search(fmt):
            raise SecurityError("a format width of a million or more is refused")

    def joined(sep, items) -> int:
        items = list(items) if not isinstance(items, (str, list, tuple, dict)) else items
        return sum(len(str(x)) for x in items) + len(str(sep)) * max(0, len(items) - 1)

    class ChatEnvironment(ImmutableSandboxedEnvironment):
        # Operations that build a large value out of small ones are refused before they run; the
        # padding / replacing / joining filters below are checked the same way.
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def unsafe_undefined(self, obj, attribute):
            raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} is refused")

        def getattr(self, obj, attribute):
            if isinstance(obj, str) and attribute in ("format", "format_map"):
                check_format(obj)
            return super().getattr(obj, attribute)

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                        limit(len(seq) * n, "a repetition")
            elif operator == "+" and _size(left) and _size(right):
                limit(_size(left) + _size(right), "a concatenation")
            elif operator == "%":
                check_format(left)
            elif operator == "**" and isinstance(left, int) and isinstance(right, int):
                if abs(right) * max(1, abs(left).bit_length()) > 8 * cap:
                    raise SecurityError(f"{left} ** {right} is too large a number")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805  (jinja2's own signature)
            owner = getattr(__obj, "__self__", None)
            name = getattr(__obj, "__name__", "")
            if isinstance(owner, str) or name in ("format", "format_map"):
                for value in (*args, *kwargs.values()):
                    if isinstance(value, int):
                        limit(value, f"str.{name} with a width")
            if isinstance(owner, str) and name == "replace" and len(args) >= 2:
                old, new = str(args[0]), str(args[1])
                n = owner.count(old) if old else len(owner) + 1
                limit(len(owner) + n * max(0, len(new) - len(old)), "str.replace")
            if isinstance(owner, str) and name == "join" and args:
                limit(joined(owner, args[0]), "str.join")
            return super().call(__context, __obj, *args, **kwargs)

    class ChatNamespace(Namespace):
        def __init__(*args, **kwargs):  # noqa: N805  (jinja2's Namespace takes self among *args too)
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key in attrs:
                ChatNamespace._check(key)
            Namespace.__init__(self, attrs)

        def __setitem__(self, key, value):
            ChatNamespace._check(key)
            limit(_size(value), "a namespace value")
            Namespace.__setitem__(self, key, value)

        @staticmethod
        def _check(key):
            if isinstance(key, str) and key.startswith("_"):
                raise SecurityError(f"a namespace attribute may not start with '_' ({key!r})")

    def raise_exception(message):
        raise TemplateError(str(message))

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        if isinstance(indent, int):
            limit(indent, "a tojson indent")
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    base = ImmutableSandboxedEnvironment().filters

    def center(value, width=80):
        limit(int(width) if isinstance(width, int) else 0, "center with a width")
        return base["center"](value, width)

    def indent(s, width=4, first=False, blank=False):
        lines = str(s).count("\n") + 1
        limit(len(str(s)) + lines * (width if isinstance(width, int) else len(str(width))), "indent")
        return base["indent"](s, width, first, blank)

    @jinja2.pass_eval_context
    def replace(eval_ctx, s, old, new, count=None):
        s_, old_, new_ = str(s), str(old), str(new)
        n = s_.count(old_) if old_ else len(s_) + 1
        limit(len(s_) + n * max(0, len(new_) - len(old_)), "replace")
        return base["replace"](eval_ctx, s, old, new, count)

    @jinja2.pass_eval_context
    def join(eval_ctx, value, d="", attribute=None):
        value = list(value) if attribute is None and not isinstance(value, (str, list, tuple, dict)) else value
        if attribute is None:
            limit(joined(d, value), "join")
        return base["join"](eval_ctx, value, d, attribute)

    def format_filter(value, *args, **kwargs):
        check_format(value)
        return base["format"](value, *args, **kwargs)

    env = ChatEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters.update(tojson=tojson, center=center, indent=indent, replace=replace, join=join, format=format_filter)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(str(fmt))
    env.globals["namespace"] = ChatNamespace
    env.globals["dict"] = lambda *a, **k: dict(*a, **k)
    return env


def render_chat(template: ChatTemplate, text: str, model: str) -> str:
    """The template rendered for one user message ``text`` with the generation prompt.

    As ``tokenizer.apply_chat_template`` does: ``messages=[{"role": "user", ...}]``,
    ``add_generation_prompt=True`` and the tokenizer's named special tokens (``bos_token`` ...).
    """
    where = f"{model}: the chat template ({template.source})"
    if template.text is None:
        raise CheckpointError(f"{where} cannot be used: {template.problem}")
    try:
        import jinja2.sandbox  # noqa: F401  (imported here, before any fork)
    except ImportError:
        raise CheckpointError("chat templates need the jinja2 package (pip install 'jinja2>=3.1.6')") from None

    if hasattr(os, "fork") and hasattr(os, "waitpid"):
        return _render_isolated(template, text, where)
    return _render(template, text, where)


def _render_isolated(template: ChatTemplate, text: str, where: str) -> str:
    """:func:`_render` in a forked child under CPU, memory and wall-clock limits; its answer comes back
    through a pipe as JSON (["ok", text] or ["error", message])."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: render, answer, and leave without running the parent's exit handlers
        code = 0
        try:
            os.close(r)
            _limit_child()
            try:
                answer = ["ok", _render(template, text, where)]
            except CheckpointError as exc:
                answer = ["error", str(exc)]
            except MemoryError:
                answer = ["error", f"{where} was stopped: it needed more than {RENDER_MEMORY >> 20} MiB"]
            data = json.dumps(answer).encode("utf-8", "surrogatepass")
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except BaseException:  # noqa: BLE001  (nothing may escape a forked child)
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], time.monotonic() + RENDER_SECONDS + 5
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise CheckpointError(f"{where} was stopped: it ran longer than {RENDER_SECONDS + 5} s")
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    try:
        status, value = json.loads(b"".join(chunks).decode("utf-8", "surrogatepass"))
    except (ValueError, TypeError):
        raise CheckpointError(f"{where} was stopped: it used more than {RENDER_SECONDS} s of CPU time or "
                              f"{RENDER_MEMORY >> 20} MiB of memory") from None
    if status != "ok":
        raise CheckpointError(value)
    return value


def _limit_child() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (RENDER_SECONDS, RENDER_SECONDS + 1))
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            size = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
        limit = size + RENDER_MEMORY
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError, StopIteration):
        pass  # no /proc: the CPU limit and the deadline still hold


def _render(template: ChatTemplate, text: str, where: str) -> str:
    """The sandboxed render itself (see :func:`render_chat`)."""
    from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError

    cap = output_cap(text)
    env = _environment(cap)
    try:
        compiled = env.from_string(template.text)
    except TemplateSyntaxError as exc:
        raise CheckpointError(f"{where} has a syntax error on line {exc.lineno}: {exc.message}") from None
    except SyntaxError as exc:  # Python's own limits on the code jinja2 generates (e.g. 20 nested blocks)
        raise CheckpointError(f"{where} does not compile: {exc.msg} (nested too deeply)") from None
    except (TemplateError, RecursionError, MemoryError, ValueError) as exc:
        raise CheckpointError(f"{where} does not compile: {exc} ({type(exc).__name__})") from None
    args = dict(template.variables)
    args.update(messages=[{"role": "user", "content": text}], tools=None, documents=None, add_generation_prompt=True)
    counter = _StepCounter(STEP_BUDGET, cap)
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
    except MemoryError:
        raise CheckpointError(f"{where} was stopped: it needed more than {RENDER_MEMORY >> 20} MiB") from None
    except Exception as exc:  # noqa: BLE001  (untrusted code: any failure is the template's, reported as such)
        raise CheckpointError(f"{where} failed to render: {exc} ({type(exc).__name__})") from None
    finally:
        sys.settrace(previous)
    return "".join(parts)
