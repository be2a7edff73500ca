"""Exit codes (one IntEnum, listed in `--help`) and the one error type the CLI turns into them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1  # an unexpected failure: a bug, reported in one sentence with the log's path
    USAGE = 2  # bad command-line arguments (Click's own code)
    BAD_MODEL = 3  # the model file is missing, not GGUF or truncated
    CAMPAIGN = 4  # the campaign manifest or a patch could not be had or did not verify
    SOURCE = 5  # llama.cpp could not be fetched, or a patch does not apply
    BUILD = 6  # CMake configure or build failed
    MISSING_TOOL = 7  # git, cmake, a compiler... is missing: `benchhub-agent doctor` says how to fix it
    UPLOAD = 8  # the server refused a result or a withdrawal, or could not be reached; a result stays in the outbox
    VERIFY = 9  # `verify`: the envelope does not verify
    MANIFEST = 10  # the server's manifest breaks a safety rule (a field out of its pattern or bounds): refused unused
    UNTRUSTED = 11  # the campaign builds code not bundled with this agent, and no one said yes to it
    PLATFORM = 12  # this Python cannot measure this machine (x86 under Rosetta on Apple silicon)
    DECLINED = 13  # on battery or in Low Power Mode, and the run was not confirmed (answer yes, or pass --yes)
    DEVICE = 14  # the model did not run on the device backend asked for (llama.cpp fell back to the CPU)
    DEADLINE = 15  # a request, a git fetch or the loading of a campaign ran past its deadline
    SIGNATURE = 16  # the campaign's manifest is not signed by a campaign key this agent trusts: refused unused
    INTERRUPTED = 130  # Ctrl-C


def exit_codes_help() -> str:
    return "\n".join(f"{code.value:>4}  {code.name.lower().replace('_', ' ')}" for code in ExitCode)


class AgentError(Exception):
    """A failure the user can act on: one sentence, one exit code."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def printable(text: str) -> str:
    """Text from a server or a patch, safe to print: a control character (an escape sequence could clear
    the screen or rewrite what the user is asked to trust) is shown as its \\x code instead."""
    return "".join(char if char.isprintable() or char == "\n" else f"\\x{ord(char):02x}" for char in text)
