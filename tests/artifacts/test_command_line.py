"""A job's one-line report reaches stderr in one write: the jobs of a local sweep share their
stderr, and two lines written in pieces at the same moment come out as one garbled line."""

import io
import sys

from artifacts.command_line import say


class Writes(io.StringIO):
    def __init__(self):
        super().__init__()
        self.calls = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_a_line_is_one_write_with_its_newline(monkeypatch):
    stderr = Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    say("stopped by SIGTERM at step 41; resume with: the sweep's command")
    assert stderr.calls == ["stopped by SIGTERM at step 41; resume with: the sweep's command\n"]
