"""``attnviz-cli model fetch ORG/NAME [--revision R]``: download a checkpoint from the Hugging Face Hub into
the local hub cache, only the files attnviz reads, with the library's progress bars.

Exit codes: 0 fetched (the checkpoint's line as ``model list`` prints it follows the folder), 1 a problem
with the repo or the cache (one line), 2 offline (one line starting ``offline:``), 130 cancelled with
Ctrl+C (one line; what arrived stays in the cache and a new fetch resumes it).
"""

from __future__ import annotations

import sys

from attnviz.cli import CliError

OFFLINE_EXIT = 2
CANCELLED_EXIT = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl+C


def register(sub) -> None:
    """Add ``model fetch`` to the ``model`` sub-commands."""
    p = sub.add_parser("fetch", help="download a checkpoint from the Hugging Face Hub (only what attnviz reads)",
                       description="Download ORG/NAME from the Hugging Face Hub into the local hub cache: its "
                                   "config, tokenizer and processor files and safetensors weights, nothing else "
                                   "(no pytorch_model.bin). Files already there are not downloaded again. The "
                                   "token is huggingface_hub's (HF_TOKEN, or `hf auth login`); HF_HUB_OFFLINE=1 "
                                   "never connects. Afterwards, every model command takes ORG/NAME.")
    p.add_argument("repo_id", metavar="ORG/NAME", help="the model's repo id on the Hub, e.g. openai-community/gpt2")
    p.add_argument("--revision", metavar="R", help="a branch, tag or commit hash (default: main)")
    p.set_defaults(func=_cmd_fetch)


def _cmd_fetch(args) -> int:
    from attnviz.checkpoints.errors import CheckpointError
    from attnviz.checkpoints.hub_cache import describe_folder
    from attnviz.checkpoints.hub_fetch import HubOffline, fetch_model

    try:
        folder = fetch_model(args.repo_id, args.revision)
    except HubOffline as exc:
        print(str(exc), file=sys.stderr)
        return OFFLINE_EXIT
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        print(f"\ncancelled: {args.repo_id} was not fetched completely; what arrived stays in the cache and "
              "the same command resumes it", file=sys.stderr)
        return CANCELLED_EXIT
    found = describe_folder(folder, args.repo_id, "cache")
    print(f"fetched {args.repo_id} into {folder}")
    print("name\tfamily\tweights\tdtype\tfolder")
    print(found.line())
    vlm = _vlm_to_fetch(folder)
    if vlm:
        print(f"this policy is built on {vlm}, which is not in the cache: attnviz-cli model fetch {vlm}")
    return 0


def _vlm_to_fetch(folder) -> str | None:
    """The repo id of the VLM a robot policy's config names (``vlm_model_name``) when neither a folder
    beside the policy nor the hub cache holds it; None otherwise."""
    from attnviz.checkpoints.config import read_json
    from attnviz.checkpoints.errors import CheckpointError
    from attnviz.checkpoints.hub_cache import cached_models

    try:
        name = read_json(folder / "config.json", "config.json").get("vlm_model_name")
    except (CheckpointError, OSError, AttributeError):
        return None
    if not isinstance(name, str) or name.count("/") != 1 or (folder / name / "config.json").is_file():
        return None
    return None if name in dict(cached_models()) else name
