"""Task ids drawn many at a time (`_support.task_ids.TaskIds`): each one new, of the form
the wire shows, and never the same in a process and the child it forked."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from mcp_tasks._support.task_ids import IDS_PER_DRAW, TaskIds

ID_FORM = re.compile(r"tsk_[A-Za-z0-9_-]{32}")


def test_ids_are_new_across_draws_and_of_one_form() -> None:
    ids = TaskIds("tsk_")
    made = [ids() for _ in range(3 * IDS_PER_DRAW + 7)]
    assert len(set(made)) == len(made)
    assert all(ID_FORM.fullmatch(made_id) for made_id in made), made[:3]


def test_two_makers_never_share_an_id() -> None:
    first, second = TaskIds(), TaskIds()
    assert not {first() for _ in range(IDS_PER_DRAW)} & {second() for _ in range(IDS_PER_DRAW)}


def test_a_forked_child_draws_ids_of_its_own() -> None:
    # In a process of its own: forking this one (its threads, under xdist) is unsafe.
    script = textwrap.dedent(
        """
        import os
        from mcp_tasks._support.task_ids import TaskIds

        ids = TaskIds()
        ids()  # drawn: the rest of the draw waits in this process
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, "".join(ids() for _ in range(5)).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        child = os.read(read, 4096).decode()
        parent = "".join(ids() for _ in range(5))
        print(parent)
        print(child)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    parent, child = done.stdout.split()
    assert len(parent) == len(child) == 5 * 36
    assert parent != child
    parent_ids = {parent[at : at + 36] for at in range(0, len(parent), 36)}
    child_ids = {child[at : at + 36] for at in range(0, len(child), 36)}
    assert not parent_ids & child_ids
