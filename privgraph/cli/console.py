"""The CLI's two rich consoles: ``out`` (stdout) and ``err`` (stderr), as wide as their content
when the output is not a terminal."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

#: the width of output that is not a terminal (a pipe, a log, CI): rich's 80 columns cut table cells
#: ("privatize.fe…"), so such output gets lines as long as their content
_PIPE_WIDTH = 400


def _console(stream: Any) -> Console:
    stderr = stream is sys.stderr
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=_PIPE_WIDTH, height=25)  # both set: also under TERM=dumb


err = _console(sys.stderr)
out = _console(sys.stdout)
