"""Fuzz journals, outside CI: redaction by every spelling, and replay of damaged lines.

    .venv/bin/python fuzz/journals.py --inputs 100000          # both parts
    .venv/bin/python fuzz/journals.py --inputs 20000 --seed 7  # the same inputs again

Redaction
---------
`--inputs` `tools/call` messages of a tool with a sensitive `password`, each character of
the method, the tool's name, the keys (`method`, `params`, `name`, `arguments`, `password`)
and the secret written in one of its JSON forms (itself, `\\u00XX` in either case, a short
escape), keys named twice now and then, and a fifth of them (holding the secret once) with a
few bytes changed (inserted, deleted, flipped). Each goes through a `RecordingCore`.
Checked for EVERY input: when the tool ran with the secret, the journal holds no spelling
of it (searched for raw, and in every JSON string of every line, decoded, and decoded
again where a string is JSON); a message the core could not read that still holds it raw
must not be kept either. Every journal replays byte for byte (a call of which nothing was
kept is skipped).

Replay
------
As many lines of a real journal, damaged: a field given a wrong type, bytes changed (the
checksum mended, so that the line is read), cut short, nested deep. Fed to `Playback`,
each must replay or raise `JournalDamaged`; nothing else may come out.

The exit status is 1 on any failure; the failing input is printed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from core.harness import ALL_CAPS, Harness, meta  # noqa: E402
from core.test_journal import recording, session  # noqa: E402
from core.tools import TOOLS  # noqa: E402

from mcp_tasks.core import CallToolResult, TaskOptions, ToolSpec  # noqa: E402
from mcp_tasks.journals._codec import JournalDamaged, frame  # noqa: E402
from mcp_tasks.journals._playback import Playback  # noqa: E402

SECRET: Final = "hunter2/s3cr3t"
_SHORT: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/"}
WRONG: Final[list[Any]] = [None, True, -1, 2**70, 1.5, "x", [], [1], {}, {"a": None}]


def spelled(rng: random.Random, text: str) -> str:
    """`text` as a JSON string literal, each character in one of its forms."""
    parts = []
    for char in text:
        forms = [f"\\u{ord(char):04x}", f"\\u{ord(char):04X}"]
        if char in _SHORT:
            forms.append(_SHORT[char])
        else:
            forms += [char] * 3
        parts.append(rng.choice(forms))
    return '"' + "".join(parts) + '"'


def message(rng: random.Random) -> bytes:
    """A call of `log/in`; a fifth with bytes changed, and then holding the secret once
    (a changed key would make a second copy an argument that is not sensitive)."""

    def key(name: str) -> str:
        return spelled(rng, name)

    changed = rng.random() < 0.2
    twice = not changed and rng.random() < 0.4
    password = f"{key('password')}:{spelled(rng, SECRET)}"
    members = ['"user":"ada"', password]
    if twice:
        members.insert(0, f"{key('password')}:{spelled(rng, SECRET)}")
    arguments = "{" + ",".join(members) + "}"
    params = [
        f"{key('name')}:{spelled(rng, 'log/in')}",
        f'"_meta":{json.dumps(meta(ALL_CAPS))}',
        f"{key('arguments')}:{arguments}",
    ]
    if twice:
        params.insert(0, f"{key('arguments')}:{{{password}}}")
    rng.shuffle(params)
    envelope = [
        '"jsonrpc":"2.0"',
        '"id":1',
        f"{key('method')}:{spelled(rng, 'tools/call')}",
        f"{key('params')}:{{{','.join(params)}}}",
    ]
    rng.shuffle(envelope)
    data = bytearray(("{" + ",".join(envelope) + "}").encode())
    if changed:
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            change = rng.choice(("insert", "delete", "flip"))
            if change == "insert":
                data[at:at] = bytes([rng.choice(b'{}[]",:\\u0 ')])
            elif change == "delete":
                del data[at]
            else:
                data[at] ^= 1 << rng.randrange(8)
    return bytes(data)


def strings_in(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *strings_in(item)]]
    if isinstance(value, list):
        return [text for item in value for text in strings_in(item)]
    if not isinstance(value, str):
        return []
    try:
        inner = json.loads(value)
    except ValueError:
        return [value]
    return [value, *strings_in(inner)] if isinstance(inner, dict | list) else [value]


def check_redaction(data: bytes) -> str | None:
    """What went wrong with this message's journal, or None."""
    ran_with_secret = []

    def handler(call: Any) -> Any:
        arguments = json.loads(bytes(call.arguments or b"{}"))
        ran_with_secret.append(arguments.get("password") == SECRET)
        return CallToolResult.text("in")

    schema = {"type": "object", "properties": {"user": {}, "password": {}}}
    spec = ToolSpec(name="log/in", input_schema=schema, sensitive_arguments=frozenset({"password"}))
    h = Harness(tools={"log/in": (spec, handler)})
    lines = recording(h)
    h.send(data)
    served = any(ran_with_secret)
    for line in lines:
        text = bytes(line).decode()
        if (served or SECRET.encode() in data) and SECRET in text:
            return "the secret is in the journal as sent"
        if served and any(SECRET in found for found in strings_in(json.loads(line))):
            return "the secret is in the journal, escaped"
    playback = Playback()
    for line in lines:
        for replayed in playback.feed(line):
            if not replayed.matches:
                return f"line {replayed.n} does not replay: {replayed.problem}"
    return None


def damaged(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    """The journal `lines` with one line damaged."""
    at = rng.randrange(len(lines))
    line = lines[at]
    how = rng.random()
    if how < 0.5:  # a wrong type somewhere
        value = json.loads(line)
        value.pop("crc")
        target = value
        while isinstance(target, dict | list) and target and rng.random() < 0.7:
            keys = list(target) if isinstance(target, dict) else list(range(len(target)))
            key = rng.choice(keys)
            if not isinstance(target[key], dict | list) or rng.random() < 0.3:
                target[key] = rng.choice(WRONG)
                break
            target = target[key]
        line = frame(json.dumps(value, separators=(",", ":")).encode())
    elif how < 0.75:  # bytes changed, checksum mended
        body = bytearray(line[: line.rindex(b',"crc":')] + b"}")
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        line = frame(bytes(body))
    elif how < 0.9:  # cut short
        line = line[: rng.randrange(len(line))]
    else:  # nested deep
        depth = rng.choice((100, 1000, 20_000))
        line = frame(b'{"gap":' + b"[" * depth + b"]" * depth + b"}")
    return [*lines[:at], line, *lines[at + 1 :]]


def check_replay(lines: list[bytes]) -> str | None:
    playback = Playback()
    try:
        for line in lines:
            playback.feed(line)
    except JournalDamaged:
        return None
    except BaseException:
        return traceback.format_exc()
    return None


def real_journal() -> list[bytes]:
    h = Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=600_000))
    lines = recording(h)
    session(h)
    return [bytes(line) for line in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs of each part")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    failures = 0
    started = time.monotonic()
    for number in range(args.inputs):
        data = message(rng)
        problem = check_redaction(data)
        if problem is not None:
            failures += 1
            print(f"redaction, input {number}: {problem}\n  {data!r}")
    journal = real_journal()
    for number in range(args.inputs):
        lines = damaged(rng, journal)
        problem = check_replay(lines)
        if problem is not None:
            failures += 1
            print(f"replay, input {number}: {problem}")
    seconds = time.monotonic() - started
    print(f"seed {args.seed}: {2 * args.inputs} inputs in {seconds:.0f} s, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
