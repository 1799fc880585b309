"""Start the real application with a test script: ``python tests/app_driver.py SCRIPT [attnviz args]``.

The script runs once the window is shown (``attnviz.ui.app.main(argv, on_shown=...)``) with ``app``,
``window``, ``ctx`` and the helpers ``wait(ms)``, ``wait_response(timeout_s=30) -> response``,
``screenshot(path)`` and ``quit(code=0)`` in its namespace. An exception in the script is printed to
stderr and the application exits with code 3. Test code only: the application itself runs no code
it is given at run time.
"""

from __future__ import annotations

import os
import sys
import time
import traceback


def namespace(app, window) -> dict:
    ctx = window.ctx

    def wait(ms: int) -> None:
        end = time.monotonic() + ms / 1000.0
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.005)

    def wait_response(timeout_s: float = 30.0):
        """Wait for the next response after everything submitted so far is computed."""
        start = ctx.response
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            app.processEvents()
            if ctx.response is not start and not ctx.compute.busy and ctx.response is not None:
                wait(50)
                return ctx.response
            time.sleep(0.005)
        raise TimeoutError(f"no computed response within {timeout_s} s")

    def screenshot(path) -> str:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        window.grab().save(os.fspath(path))
        return os.fspath(path)

    def quit(code: int = 0) -> None:  # noqa: A001 - the script's name for it
        window.files.prompts.save_changes = lambda *_a: "discard"
        window.close()
        app.exit(code)

    return {"app": app, "window": window, "ctx": ctx, "wait": wait, "wait_response": wait_response,
            "screenshot": screenshot, "quit": quit, "__name__": "__attnviz_test_script__"}


def run(script: str, args: list[str]) -> int:
    from attnviz.ui.app import main

    def on_shown(app, window):
        try:
            with open(script, encoding="utf-8") as fh:
                code = compile(fh.read(), script, "exec")
            ns = namespace(app, window)
            ns["__file__"] = os.path.abspath(script)
            exec(code, ns)  # noqa: S102 - the driver's purpose
        except SystemExit as exc:
            app.exit(int(exc.code or 0))
        except BaseException:  # noqa: BLE001 - report any failure of the script and stop
            traceback.print_exc(file=sys.stderr)
            app.exit(3)

    return main(args, on_shown=on_shown)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise SystemExit(run(sys.argv[1], sys.argv[2:]))
