"""Copy stdin to a file, each line prefixed with the wall-clock time (epoch seconds)."""

import sys
import time

with open(sys.argv[1], "ab", buffering=0) as out:
    for line in sys.stdin.buffer:
        out.write(b"%.1f " % time.time() + line)
