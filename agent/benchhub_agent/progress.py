"""What the agent is doing, on stderr: one live line on a terminal, cut to the terminal's width so it never
wraps, and plain lines otherwise (CI, pipes)."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def fit(text: str, width: int) -> str:
    """The text in at most `width` characters: the middle gives way, the stage and the timing stay."""
    if len(text) <= width:
        return text
    if width < 10:
        return text[:width]
    keep = width - 1
    return text[: keep - keep // 3] + "…" + text[len(text) - keep // 3 :]


class Progress:
    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.stage = ""
        self.stage_started = time.monotonic()
        self._last_plain = ""
        self._line_open = False

    def start(self, stage: str) -> None:
        self._close_line()
        self.stage = stage
        self.stage_started = time.monotonic()
        self._emit(stage, force_plain=True)

    def update(self, detail: str, fraction: float | None = None) -> None:
        """`fraction` (0..1) of the stage done, when known, gives an ETA from the elapsed time."""
        elapsed = time.monotonic() - self.stage_started
        timing = _clock(elapsed)
        # An ETA from the first percent of a build swings wildly (44:39 for a moment): none before a tenth
        # of the stage and 20 seconds of it.
        if fraction is not None and 0.1 <= fraction < 1 and elapsed >= 20:
            timing += f", ETA {_clock(elapsed / fraction - elapsed)}"
        self._emit(f"{self.stage}: {detail} [{timing}]")

    def note(self, message: str) -> None:
        self._close_line()
        print(message, file=self.stream, flush=True)

    def finish(self) -> None:
        self._close_line()

    def _emit(self, text: str, force_plain: bool = False) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K" + fit(text, shutil.get_terminal_size().columns - 1))
            self.stream.flush()
            self._line_open = True
        elif force_plain or text.split(" [")[0] != self._last_plain:
            # Plain output: one line per change of what is being done, never per tick.
            self._last_plain = text.split(" [")[0]
            print(text, file=self.stream, flush=True)

    def _close_line(self) -> None:
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False
