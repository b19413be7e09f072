"""storage.transfer.locks.FileLock against the lock huggingface_hub takes (the `filelock` library's,
on the same `.locks/<repo>/<etag>.lock` files): each excludes the other, across processes and within
one; and ours may be released by another thread than the one that took it. Real flock(2) on real
files; the other process is a real interpreter holding huggingface_hub's lock."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import filelock

from storage.transfer.locks import FileLock

HOLD = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


def test_ours_and_huggingface_hubs_exclude_each_other(tmp_path):
    path = tmp_path / ".locks" / "models--alice--m" / "abc.lock"  # (its directory does not exist yet)
    ours = FileLock(path)
    assert ours.acquire(blocking=False) and ours.held
    theirs = filelock.FileLock(str(path))
    try:
        theirs.acquire(timeout=0.2)
        raise AssertionError("huggingface_hub's lock was granted while ours was held")
    except filelock.Timeout:
        pass
    ours.release()
    assert not ours.held
    theirs.acquire(timeout=5)
    assert not FileLock(path).acquire(blocking=False)  # theirs held: ours is refused at once
    theirs.release()
    assert FileLock(path).acquire(blocking=False)


def test_a_lock_held_by_another_process_is_waited_for(tmp_path):
    path = tmp_path / "blob.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        ours = FileLock(path)
        assert not ours.acquire(blocking=False)
        got = []
        waiter = threading.Thread(target=lambda: got.append(ours.acquire()))
        waiter.start()
        time.sleep(0.3)
        assert not got  # still waiting while the other process holds it
        holder.stdin.write("\n")
        holder.stdin.flush()
        waiter.join(10)
        assert got == [True] and ours.held
        ours.release()
    finally:
        holder.kill()
        holder.wait()


def test_two_of_ours_in_one_process_exclude_each_other_and_any_thread_may_release(tmp_path):
    path = tmp_path / "evict.lock"
    a, b = FileLock(path), FileLock(path)
    assert a.acquire(blocking=False)
    assert not b.acquire(blocking=False)
    releaser = threading.Thread(target=a.release)
    releaser.start()
    releaser.join()
    assert not a.held
    with b:
        assert b.held and not a.acquire(blocking=False)
    assert not b.held and a.acquire(blocking=False)
    a.release()
    a.release()  # (not held: nothing happens)
