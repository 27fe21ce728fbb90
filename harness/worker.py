"""One spawned worker process that runs every case, and survives the submission's failures.

The worker is reused across cases, so a submission's module-level state persists as it
does on the leaderboard. If the submission raises, crashes the process, or hangs past the
case's time limit, the call raises WorkerFailure with a message saying which, and the
worker is replaced before the next case (a CUDA fault poisons the process that saw it).
"""

import multiprocessing
import signal
import sys
import time
import traceback
from pathlib import Path

HARNESS = Path(__file__).resolve().parent


class WorkerFailure(Exception):
    """The case could not complete in the worker; the message says why."""


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _traceback_beyond_the_harness(e: BaseException, most_lines: int = 24) -> str:
    """The exception's traceback from the first frame outside harness/ on (the submission's own); none
    when the harness itself raised it."""
    tb = e.__traceback__
    # the harness's own frames, and importlib's (<frozen ...>) between it and the submission's file
    while tb is not None and (
        Path(tb.tb_frame.f_code.co_filename).parent == HARNESS or tb.tb_frame.f_code.co_filename.startswith("<frozen")
    ):
        tb = tb.tb_next
    if tb is None and not isinstance(e, SyntaxError):  # a SyntaxError's traceback shows the offending line
        return ""
    lines = "".join(traceback.format_exception(type(e), e, tb)).splitlines(keepends=True)
    return "".join(lines[:1] + lines[1:][-most_lines:])


def _serve(conn, eval_dir: str) -> None:
    sys.path.insert(0, eval_dir)
    from harness import runners

    while True:
        try:
            name, args, kwargs = conn.recv()
        except EOFError:
            return
        try:
            result = ("ok", getattr(runners, name)(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent as text
            result = ("error", f"{type(e).__name__}: {e}\n" + _traceback_beyond_the_harness(e))
        conn.send(result)


class Worker:
    def __init__(self, eval_dir: str):
        self._ctx = multiprocessing.get_context("spawn")
        self._eval_dir = eval_dir
        self._proc = None
        self._conn = None

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self._eval_dir), name="eval-worker")
        self._proc.start()
        child.close()
        self._conn = parent

    def call(self, name: str, *args, timeout: float, **kwargs):
        """Run runners.<name>(*args, **kwargs) in the worker and return its result."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send((name, args, kwargs))
        deadline = time.monotonic() + timeout
        while not self._conn.poll(0.2):
            if not self._proc.is_alive() and not self._conn.poll(0):
                raise self._died()
            if time.monotonic() > deadline:
                self.stop()
                raise WorkerFailure(f"the case did not finish within {timeout:.0f} s; the worker was killed")
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise self._died() from None
        if status == "error":
            self.stop()
            raise WorkerFailure(value)
        return value

    def _died(self) -> WorkerFailure:
        self._proc.join(10)  # the pipe can close before the exit status is in
        code = self._proc.exitcode
        self.stop()
        return WorkerFailure(f"the worker process died ({_describe_exit(code)}) while running the case")

    def stop(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(5)
                if self._proc.is_alive():
                    self._proc.kill()
            self._proc.join()
            self._conn.close()
        self._proc = None
        self._conn = None
