"""A local Jupyter starts: `make lab`'s JupyterLab serves the notebooks, runs one through its API, and stops.

The server listens on 127.0.0.1 only, on a free port, with a token, and keeps its
configuration, runtime files and settings in a temporary folder (nothing is written to
the user's ~/.jupyter). Every wait is bounded; the server is stopped through its own
API, and the test checks that it and its kernel files are gone.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from notebook_index import NOTEBOOKS, ROOT, read_notebook

BIN = Path(sys.executable).parent
STARTUP_SECONDS = 90  # a cold start on a loaded 2-core machine; it usually answers within ~5 s
CELL_SECONDS = 120


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Server:
    """A JupyterLab server of this environment, started as `make lab` starts it, plus a tiny REST client."""

    def __init__(self, tmp: Path):
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.runtime = tmp / "runtime"
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(tmp / "config"),
            JUPYTER_RUNTIME_DIR=str(self.runtime),
            JUPYTER_DATA_DIR=str(tmp / "data"),
            JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
            IPYTHONDIR=str(tmp / "ipython"),
            PYTHONPATH=str(ROOT / "src"),
            PYTHONHASHSEED="0",
        )
        self.log = open(tmp / "server.log", "w+b")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [
                str(BIN / "jupyter"),
                "lab",
                *LAB_OPTIONS,
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the kernels it starts can be cleaned up with it
        )

    def server_log(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def api(self, method: str, path: str, body: dict | None = None) -> dict | list:
        status, payload = self.request(method, path, body)
        assert 200 <= status < 300, f"{method} {path} answered {status}: {payload[:500]!r}"
        return json.loads(payload) if payload else {}

    def wait_until_up(self) -> float:
        """Seconds until the server answered (printed, never asserted on); fails the test if it never does."""
        start = time.monotonic()
        while time.monotonic() - start < STARTUP_SECONDS:
            if self.proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {self.proc.returncode} before answering:\n{self.server_log()}")
            try:
                if self.request("GET", "/api/status", timeout=5)[0] == 200:
                    return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        pytest.fail(f"jupyter lab did not answer within {STARTUP_SECONDS} s:\n{self.server_log()}")

    def stop(self) -> None:
        """Kill what is left (only if the test failed before the orderly shutdown), and close the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this test created for the server
                self.proc.wait(timeout=20)
        self.log.close()


def _lab_options() -> list[str]:
    """The options of the Makefile's `lab` target, so that the test starts what `make lab` starts."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lab:.*\n\t(.+)$", makefile, re.M)
    assert recipe, "the Makefile has no `lab` target"
    assert recipe.group(1).startswith("$(VENV)/bin/jupyter lab $(LAB_OPTIONS)"), f"`make lab` runs: {recipe.group(1)}"
    options = re.search(r"^LAB_OPTIONS\s*:=(.*)$", makefile, re.M)
    assert options, "the Makefile does not define LAB_OPTIONS"
    words = options.group(1).split()
    if getattr(os, "geteuid", lambda: 1)() == 0:  # as the Makefile does: Jupyter refuses root unless told
        words.append("--allow-root")
    return words


LAB_OPTIONS = _lab_options()


def test_make_lab_serves_on_loopback_only():
    assert "--ip=127.0.0.1" in LAB_OPTIONS, "`make lab` must listen on localhost only"
    assert "--notebook-dir=notebooks" in LAB_OPTIONS, "`make lab` opens the notebooks folder"


class Kernel:
    """One kernel of the server, driven over its websocket with the Jupyter messaging protocol."""

    def __init__(self, server: Server, kernel_id: str):
        import websocket

        self.session = uuid.uuid4().hex
        url = f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels?session_id={self.session}"
        self.ws = websocket.create_connection(
            url, header=[f"Authorization: token {server.token}"], timeout=CELL_SECONDS
        )

    def execute(self, code: str) -> tuple[str, list[dict]]:
        """Run ``code``; return the reply status and the iopub messages it produced, once the kernel is idle."""
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "session": self.session,
            "username": "test",
            "version": "5.3",
        }
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        self.ws.send(
            json.dumps(
                {
                    "header": header,
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": "shell",
                    "buffers": [],
                }
            )
        )
        status, outputs, idle = None, [], False
        deadline = time.monotonic() + CELL_SECONDS
        while (status is None or not idle) and time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if msg["channel"] == "shell" and kind == "execute_reply":
                status = msg["content"]["status"]
            elif kind == "status":
                idle = msg["content"]["execution_state"] == "idle"
            elif msg["channel"] == "iopub" and kind in ("stream", "execute_result", "display_data", "error"):
                outputs.append(msg)
        assert status is not None and idle, f"no answer within {CELL_SECONDS} s to:\n{code[:300]}"
        return status, outputs

    def close(self) -> None:
        self.ws.close()


def _stdout(outputs: list[dict]) -> str:
    return "".join(
        m["content"]["text"]
        for m in outputs
        if m["header"]["msg_type"] == "stream" and m["content"]["name"] == "stdout"
    )


@pytest.mark.slow
def test_jupyterlab_starts_lists_runs_a_notebook_and_stops(tmp_path):
    assert (BIN / "jupyter-lab").exists(), "JupyterLab is not installed in this environment (requirements.txt)"
    notebook = NOTEBOOKS[0]
    server = Server(tmp_path)
    try:
        startup = server.wait_until_up()  # fails the test, with the server's log, if it never answers

        # the web pages a reader opens: JupyterLab, and the Notebook 7 interface
        for page, marker in (("/lab", b"JupyterLab"), ("/tree", b"Notebook")):
            status, html = server.request("GET", page)
            assert status == 200 and marker in html, f"{page} answered {status}"

        # without the token the API refuses: the server is not open to whoever reaches the port
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.base + "/api/contents", timeout=10)
        assert refused.value.code == 403

        # the contents API lists exactly the course's notebooks (the server runs in notebooks/)
        listing = server.api("GET", "/api/contents/")
        listed = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert listed == [p.name for p in NOTEBOOKS]
        model = server.api("GET", f"/api/contents/{notebook.name}")
        assert model["type"] == "notebook" and model["content"]["cells"], "the notebook does not open"

        # open the notebook as JupyterLab does (a session starts its kernel) and run its first code cells in
        # order, up to the third that prints something: what they print must be what the notebook stores
        # (nbval checks every cell of every notebook; here the point is the server's kernel)
        session = server.api(
            "POST",
            "/api/sessions",
            {"path": notebook.name, "type": "notebook", "name": notebook.name, "kernel": {"name": "python3"}},
        )
        kernel = Kernel(server, session["kernel"]["id"])
        try:
            cells = [c for c in read_notebook(notebook).cells if c.cell_type == "code"]
            assert "setup()" in cells[0].source, "the first code cell is the setup cell"
            started = time.monotonic()
            compared = 0
            for i, cell in enumerate(cells):
                status, outputs = kernel.execute(cell.source)
                errors = [m["content"] for m in outputs if m["header"]["msg_type"] == "error"]
                assert status == "ok" and not errors, f"{notebook.name} code cell {i} failed: {errors}"
                stored = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
                if stored.strip() and "nbval-ignore-output" not in cell.metadata.get("tags", []):
                    assert _stdout(outputs) == stored, (
                        f"{notebook.name} code cell {i} printed something else than stored"
                    )
                    compared += 1
                    if compared == 3:
                        break
            run_seconds = time.monotonic() - started
            assert compared == 3, f"{notebook.name} has too few printed outputs to compare"

            # the kernel runs this checkout's library, in notebooks/, with the setup() of the course
            status, outputs = kernel.execute(
                "import os, attnbook, torch\nprint(attnbook.__file__)\nprint(os.getcwd())\n"
                "print(torch.get_num_threads())"
            )
            file, cwd, threads = _stdout(outputs).split()
            assert status == "ok"
            assert Path(file).resolve() == (ROOT / "src" / "attnbook" / "__init__.py").resolve()
            assert Path(cwd).resolve() == (ROOT / "notebooks").resolve()
            assert threads == "2"
        finally:
            kernel.close()
        assert any(k["id"] == session["kernel"]["id"] for k in server.api("GET", "/api/kernels"))

        # stop the server through its API: it shuts its kernels down and exits
        stopping = time.monotonic()
        server.api("POST", "/api/shutdown")
        assert server.proc.wait(timeout=60) == 0, server.server_log()
        stop_seconds = time.monotonic() - stopping
        assert not _port_open(server.port), "the port still answers after shutdown"
        leftovers = sorted(p.name for p in server.runtime.glob("*.json"))
        assert not leftovers, f"server or kernel files left behind (a process still running?): {leftovers}"
    finally:
        server.stop()
    print(
        f"\nJupyterLab answered after {startup:.1f} s; "
        f"{i + 1} cells of {notebook.name} ran through its API in {run_seconds:.1f} s; "
        f"it stopped in {stop_seconds:.1f} s"
    )
