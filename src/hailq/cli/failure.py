"""Turn any failure into one line on stderr and an exit code, never a traceback.

Exit codes, one convention for every command:

- 0 success;
- 2 bad input, refused before anything was done: an unknown command or option,
  a bad value, body, message, URL or worker target (click's usage errors and
  every ``hailq.InvalidArgument``), options that do not go together, a URL
  whose backend is not installed (``hailq.BackendUnavailable``: a setup
  problem, found before anything is opened);
- 1 a failure while doing it: the database is unreachable or broken
  (``StorageError``), the database file, queue or topic named does not exist
  there, a batch failed, a purge was declined, or any other error;
- 130 interrupted.

Every message passes through ``scrub``, which removes
the password of any URL on the command line or in ``HAILQ_URL``, so a database
password cannot leak even through an error text hailq does not control.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from urllib.parse import quote, unquote, urlsplit

import click

import hailq
from hailq.cli.context import ENV_URL

OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130

_URL_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def run_safely(invoke: Callable[[], int], argv: Sequence[str]) -> int:
    """Call ``invoke``; report what it raises as one ``hailq: ...`` line and an exit code."""
    secrets = passwords([*argv, os.environ.get(ENV_URL, "")])
    try:
        return invoke()
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.format_message(), err=True)
        return USAGE
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "hailq"
        return report(f"{exc.format_message()} (see '{where} --help')", secrets, exc.exit_code)
    except click.ClickException as exc:
        return report(exc.format_message(), secrets, exc.exit_code)
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):
            return report("interrupted", secrets, INTERRUPTED, prefix="hailq: ")
        return report("aborted", secrets, FAILED, prefix="hailq: ")
    except KeyboardInterrupt:
        return report("interrupted", secrets, INTERRUPTED, prefix="hailq: ")
    except hailq.InvalidArgument as exc:  # hailq checked an argument the user gave
        return report(str(exc) or type(exc).__name__, secrets, USAGE)
    except hailq.BackendUnavailable as exc:  # found from the URL alone, before connecting
        return report(str(exc) or type(exc).__name__, secrets, USAGE)
    except hailq.HailqError as exc:
        return report(str(exc) or type(exc).__name__, secrets, FAILED)
    except BrokenPipeError:
        _silence_stdout()
        return FAILED
    except Exception as exc:  # the promise is "never a traceback", whatever broke
        return report(f"unexpected {type(exc).__name__}: {exc}", secrets, FAILED)


def report(message: str, secrets: set[str], code: int, prefix: str = "hailq: error: ") -> int:
    click.echo(prefix + scrub(message, secrets), err=True)
    return code


def scrub(message: str, secrets: set[str]) -> str:
    """One line, with every known password replaced by ``***``."""
    text = " ".join(message.split())
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def passwords(texts: Sequence[str]) -> set[str]:
    """The passwords (raw, percent-decoded and re-encoded) of every URL in ``texts``."""
    found: set[str] = set()
    for text in texts:
        for url in _URL_PATTERN.findall(text or ""):
            try:
                password = urlsplit(url).password
            except ValueError:
                continue
            if password:
                found.update({password, unquote(password), quote(unquote(password), safe="")})
    return {p for p in found if p}


def _silence_stdout() -> None:
    # The reader went away (``hailq dead Q | head``); stop Python complaining at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass
