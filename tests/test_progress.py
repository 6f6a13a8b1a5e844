"""deepspeech2.progress: every bar is made one way and DS2_PROGRESS turns them all off (or to a log's pace)."""

import io

import pytest

from deepspeech2 import progress
from deepspeech2.progress import LOG_SECONDS, PROGRESS_ENV, progress_bar, step_bar


@pytest.fixture(autouse=True)
def _unset(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)  # the user's own setting must not decide these tests


def _drawn(**kwargs) -> str:
    out = io.StringIO()
    for _ in progress_bar(range(3), desc="work", file=out, mininterval=0, **kwargs):
        pass
    return out.getvalue()


def test_a_bar_by_default_none_when_its_caller_or_the_switch_says_so(monkeypatch):
    assert "3/3" in _drawn()
    assert _drawn(show=False) == ""
    for off in ("0", "false", "No", "off"):
        monkeypatch.setenv(PROGRESS_ENV, off)
        assert _drawn() == "" and not progress.progress_enabled()


def test_log_mode_refreshes_at_a_logs_pace(monkeypatch):
    assert progress_bar(range(1), file=io.StringIO()).mininterval == 0.1  # tqdm's own
    monkeypatch.setenv(PROGRESS_ENV, "log")
    assert progress_bar(range(1), file=io.StringIO()).mininterval == LOG_SECONDS
    assert progress.progress_enabled()


def test_step_bar_in_a_log_is_one_line_at_a_time(capsys):
    bar = step_bar(100, "epoch 1", show=True)  # pytest's captured stdout is not a terminal
    for i in range(1, 101):
        bar.update(i, [("loss", 1.0 / i)])
    bar.update(100, finalize=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["epoch 1: step 100/100 0s loss 0.01"] and "\r" not in lines[0]


def test_step_bar_in_a_log_no_repeated_line_nor_a_count_past_its_target(capsys, monkeypatch):
    monkeypatch.setattr(progress, "LOG_SECONDS", 0)  # a line at every update
    bar = step_bar(3, "epoch 2", show=True)  # 3: the last epoch's count, an estimate
    for i in range(1, 5):
        bar.update(i)
    bar.update(4, finalize=True)  # the end of the epoch, already printed at its last step
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[3] for line in lines] == ["1/3", "2/3", "3/3", "4"]


def test_step_bar_switched_off_prints_nothing(capsys, monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "0")
    monkeypatch.setattr(progress, "LOG_SECONDS", 0)
    bar = step_bar(3, "epoch 1", show=True)
    for i in range(1, 4):
        bar.update(i, [("loss", 1.0)])
    bar.update(3, finalize=True)
    assert capsys.readouterr().out == ""


def test_step_bar_on_a_terminal_is_a_progress_bar(monkeypatch):
    out = io.StringIO()
    out.isatty = lambda: True
    monkeypatch.setattr("sys.stdout", out)
    bar = step_bar(4, "epoch 1", show=True)
    for i in range(1, 5):
        bar.update(i, [("loss", 2.0)])
    bar.update(4, finalize=True)
    assert "epoch 1" in out.getvalue() and "4/4" in out.getvalue() and "loss=2" in out.getvalue()
