"""tools/submit.py (make submit): the gate first, then the leaderboard's CLI with the right flags, and
the server's refusals told in one line."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

FAKE_CLI = """#!/bin/sh
echo "$@" > "$HOME/cli_args"
"""


@pytest.fixture
def env(tmp_path):
    """A PATH with a fake `popcorn` that records its arguments, and a registered HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "popcorn"
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    (tmp_path / ".popcorn.yaml").write_text("cli_id: abc123\n")
    return {**os.environ, "HOME": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"}


SMALL = "template.py"  # where the file does not matter: KernelGuard reads it in a fraction of submission.py's time


def submit(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "tools.submit", *args], cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


def test_the_default_is_a_test_run_with_plain_output_off_a_terminal(env):
    proc = submit(env)
    assert proc.returncode == 0, proc.stderr
    args = open(os.path.join(env["HOME"], "cli_args")).read().split()
    assert args == ["submit", "--gpu", "B200", "--leaderboard", "nvfp4_group_gemm", "--mode", "test", "--no-tui", "submission.py"]


def test_make_submit_passes_the_mode_and_checks_the_file_first(env):
    proc = subprocess.run(["make", "-s", "submit", "MODE=leaderboard"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "passes the leaderboard's gate" in proc.stdout
    assert "--mode leaderboard" in open(os.path.join(env["HOME"], "cli_args")).read()


def test_a_file_that_fails_the_gate_is_not_sent(env, tmp_path):
    planted = tmp_path / "submission.py"
    planted.write_text((ROOT / "submission.py").read_text().replace('"""NVFP4', '"""Stream-free NVFP4', 1))
    proc = submit(env, str(planted))
    assert proc.returncode == 1 and "not sent" in proc.stderr
    assert not os.path.exists(os.path.join(env["HOME"], "cli_args"))


def test_an_unknown_mode_is_refused(env):
    proc = submit(env, "--mode", "ranked")
    assert proc.returncode == 2 and "MODE must be one of test, benchmark, leaderboard" in proc.stderr


def test_a_missing_registration_says_how_to_register(env):
    os.remove(os.path.join(env["HOME"], ".popcorn.yaml"))
    proc = submit(env, SMALL)
    assert proc.returncode == 1 and "popcorn register discord" in proc.stderr


def test_the_older_cli_name_is_found_too(env, tmp_path):
    os.rename(tmp_path / "bin" / "popcorn", tmp_path / "bin" / "popcorn-cli")
    proc = submit({**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, SMALL)  # no other popcorn found first
    assert proc.returncode == 0 and "popcorn-cli submit" in proc.stdout


def test_no_cli_says_where_to_get_it(env, tmp_path):
    os.remove(tmp_path / "bin" / "popcorn")
    proc = submit({**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, SMALL)
    assert proc.returncode == 1 and "gpu-mode/popcorn-cli/releases" in proc.stderr


REFUSING_CLI = """#!/bin/sh
echo "Submitting to the leaderboard..."
echo "Error: Server returned status 400 Bad Request: {\\"detail\\":\\"The deadline to submit to nvfp4_group_gemm has passed.\\\\nIt was 2026-02-21 07:30:00+00:00 and today is 2026-12-01.\\"}"
echo "more detail that the one line replaces"
exit 1
"""


def test_the_closed_leaderboard_is_said_before_sending_and_its_refusal_is_one_line(env, tmp_path):
    (tmp_path / "bin" / "popcorn").write_text(REFUSING_CLI)
    proc = submit(env, SMALL)
    assert proc.returncode == 1
    assert "nvfp4_group_gemm closed on 2026-02-21 07:30" in proc.stdout and "Submitting to the leaderboard" in proc.stdout
    assert "more detail" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "submit: refused by the server: the leaderboard nvfp4_group_gemm is past its deadline, and its server refuses every mode "
        "after one (test, benchmark, profile and leaderboard alike); nothing ran"
    ]


def test_another_leaderboard_and_gpu_can_be_named(env):
    proc = subprocess.run(
        ["make", "-s", "submit", "LEADERBOARD=grayscale_v2", "GPU=H100", "MODE=benchmark", f"SUBMISSION={SMALL}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "closed" not in proc.stdout
    args = open(os.path.join(env["HOME"], "cli_args")).read().split()
    assert args[:7] == ["submit", "--gpu", "H100", "--leaderboard", "grayscale_v2", "--mode", "benchmark"]
