"""`socket_timeout` (the TVM tracker client's socket default) from several threads at once."""

from __future__ import annotations

import socket
import threading

from hwnas.runtimes.tvm import socket_timeout


def test_overlapping_blocks_in_threads_keep_the_longest_and_restore_the_default():
    assert socket.getdefaulttimeout() is None
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with socket_timeout(3.0):
            first_in.set()
            second_in.wait(10)
            seen["both"] = socket.getdefaulttimeout()
        first_out.set()

    def second():
        first_in.wait(10)
        with socket_timeout(10.0):
            second_in.set()
            first_out.wait(10)
            seen["second alone"] = socket.getdefaulttimeout()

    threads = [threading.Thread(target=f) for f in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    # the first block to leave did not put None back under the second (a socket made there
    # would wait forever), and the last one did not leave its own behind
    assert seen == {"both": 10.0, "second alone": 10.0}
    assert socket.getdefaulttimeout() is None
