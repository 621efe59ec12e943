"""The log follower that runs ON the host (standard library only, Python 3.6+).

Shipped as `python3 -u -c <this file> PATH INODE OFFSET PREV_INODE PREV_OFFSET MODE LAST_N` and
also run as a local subprocess by LocalHost, so both hosts follow with the same code. It prints one
JSON record per line on stdout:

  {"e": "opened"|"rotated"|"truncated"|"waiting", "i": ino, "o": off, "pi": ino, "po": off}
  {"l": [line, ...], "i": ino, "o": off, "pi": ino, "po": off}

`i`/`o` is the cursor after the record: the file's inode and the byte offset just after the last
complete line delivered from it; `pi`/`po` the rotated file still watched for late writes. Only
complete lines are delivered (a partial last line waits for its newline); bytes are decoded as
UTF-8 with replacement; a line longer than 64 KiB is cut with a marker.

Resuming (INODE != 0) is exact: if the path still has that inode, reading continues at OFFSET (or
restarts at 0 with `truncated` if the file shrank); if not, the old inode is looked up in the same
directory (rotated name), drained from OFFSET, then the rotated files written after it (rotated
names, by modification time) and finally the new file at the path from 0. Live rotation is handled
the same way, and the file it rotated from stays open for GRACE seconds so late writes still come.
Rotated names are the log's name plus `.N`, `.<timestamp>` or `-<date>` (compressed ones skipped).
The follower exits when its stdin reaches EOF (the channel or the client went away).
"""

import json
import os
import re
import select
import sys
import time

MAX_LINE = 65536
CHUNK = 65536
GRACE = 5.0
POLL_MIN = 0.002
POLL_MAX = 0.02
FLUSH_CHUNKS = 16
SKIP_SUFFIXES = (".gz", ".xz", ".bz2", ".zst", ".lz4", ".zip", ".tmp", ".pid")
CUT_MARK = " [eagle3-tui: line cut at %d of %d bytes]"


class Reader:
    """One open file: its inode, the committed offset (after the last complete line) and the
    partial line read past it (first MAX_LINE + 1 bytes kept, real length counted)."""

    def __init__(self, fd, ino, pos):
        self.fd = fd
        self.ino = ino
        self.pos = pos
        self.partial = b""
        self.partial_len = 0
        if fd is not None:
            os.lseek(fd, pos, os.SEEK_SET)

    def read_end(self):
        return self.pos + self.partial_len

    def reset(self, pos):
        self.pos = pos
        self.partial = b""
        self.partial_len = 0
        if self.fd is not None:
            os.lseek(self.fd, pos, os.SEEK_SET)

    def close(self):
        try:
            os.close(self.fd)
        except OSError:
            pass

    def _add_partial(self, data):
        keep = MAX_LINE + 1 - len(self.partial)
        if keep > 0:
            self.partial += data[:keep]
        self.partial_len += len(data)

    def _cut(self, raw, total):
        if total > MAX_LINE:
            return raw[:MAX_LINE].decode("utf-8", "replace") + CUT_MARK % (MAX_LINE, total)
        return raw.decode("utf-8", "replace")

    def read_chunk(self):
        """Read one chunk; return the complete lines it finished ([] if none), None at EOF."""
        data = os.read(self.fd, CHUNK)
        if not data:
            return None
        return self.feed(data)

    def feed(self, data):
        """Take the next bytes of the file (at most CHUNK); return the lines they completed."""
        last = data.rfind(b"\n")
        if last < 0:
            self._add_partial(data)
            return []
        block = data[:last]
        lines = []
        rest_of_block = True
        if self.partial_len:
            nl = block.find(b"\n")
            head = block if nl < 0 else block[:nl]
            lines.append(self._cut(self.partial + head, self.partial_len + len(head)))
            if nl < 0:
                rest_of_block = False
            else:
                block = block[nl + 1 :]
        if rest_of_block:
            lines.extend(block.decode("utf-8", "replace").split("\n"))
        self.pos += self.partial_len + last + 1
        self.partial = b""
        self.partial_len = 0
        rest = data[last + 1 :]
        if rest:
            self._add_partial(rest)
        return lines


def tail_offset_reads(size, n):
    """Find where the last n complete lines start (just after the last newline for n == 0),
    reading backwards from `size`. A generator, so the same rule serves a local fd and an SFTP
    file: it yields (position, length) reads, is sent the bytes read there, and returns the offset."""
    need = n + 1
    pos = size
    while pos > 0:
        step = min(CHUNK, pos)
        pos -= step
        data = yield pos, step
        end = len(data)
        while True:
            nl = data.rfind(b"\n", 0, end)
            if nl < 0:
                break
            need -= 1
            if need == 0:
                return pos + nl + 1
            end = nl
    return 0


def tail_offset(fd, size, n):
    """`tail_offset_reads` over an open file descriptor."""
    reads = tail_offset_reads(size, n)
    try:
        pos, length = next(reads)
        while True:
            pos, length = reads.send(os.pread(fd, length, pos))
    except StopIteration as done:
        return done.value


class Follower:
    def __init__(self, path):
        self.path = path
        self.dir = os.path.dirname(path) or "."
        self.base = os.path.basename(path)
        # rotated names: server.log.1, server.log.20261129-083000, server.log-20261129 (dateext)
        self.rotated_name = re.compile(re.escape(self.base) + r"[.-][0-9][0-9A-Za-z._-]*$")
        self.cur = None
        self.old = None
        self.old_deadline = 0.0
        self.dirty = False

    # ---- output ----------------------------------------------------------------------------
    def cursor(self):
        c = {"i": self.cur.ino if self.cur else 0, "o": self.cur.pos if self.cur else 0}
        c["pi"] = self.old.ino if self.old else 0
        c["po"] = self.old.pos if self.old else 0
        return c

    def emit(self, rec):
        sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.dirty = True

    def event(self, kind):
        rec = {"e": kind}
        rec.update(self.cursor())
        self.emit(rec)

    def flush(self):
        if self.dirty:
            sys.stdout.flush()
            self.dirty = False

    # ---- reading -----------------------------------------------------------------------------
    def pump(self, reader, max_chunks=FLUSH_CHUNKS):
        """Deliver what `reader` has (at most max_chunks chunks); True if anything was read."""
        progressed = False
        for _ in range(max_chunks):
            lines = reader.read_chunk()
            if lines is None:
                break
            progressed = True
            if lines:
                rec = {"l": lines}
                rec.update(self.cursor())
                self.emit(rec)
        return progressed

    def drain(self, reader):
        while self.pump(reader):
            self.flush()

    def open_at(self, name_or_path, ino, pos):
        fd = os.open(name_or_path, os.O_RDONLY)
        st = os.fstat(fd)
        if ino and st.st_ino != ino:
            os.close(fd)
            return None
        return Reader(fd, st.st_ino, min(pos, st.st_size) if pos else 0)

    def find_inode(self, ino):
        """Open the file of this inode in the log's directory (it may have been renamed)."""
        try:
            entries = list(os.scandir(self.dir))
        except OSError:
            return None
        for entry in entries:
            try:
                if entry.inode() == ino and entry.is_file():
                    return self.open_at(entry.path, ino, 0)
            except OSError:
                continue
        return None

    def successors(self, after, exclude):
        """Rotated siblings (see `rotated_name`) written after `after`, oldest first."""
        try:
            ref = os.fstat(after.fd).st_mtime_ns
            entries = list(os.scandir(self.dir))
        except OSError:
            return []
        found = []
        for entry in entries:
            name = entry.name
            if not self.rotated_name.match(name) or name.endswith(SKIP_SUFFIXES):
                continue
            try:
                ino = entry.inode()
                if ino in exclude or not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue
            if st.st_mtime_ns >= ref:
                found.append((st.st_mtime_ns, name, ino, entry.path))
        found.sort()
        return [(path, ino) for _, _, ino, path in found]

    def stat_path(self):
        try:
            return os.stat(self.path)
        except OSError:
            return None

    def set_old(self, reader):
        if self.old is not None and self.old is not reader:
            self.old.close()
        self.old = reader
        self.old_deadline = time.monotonic() + GRACE

    def switch(self, st):
        """The path now names another file: finish the current one, the rotated files written
        after it, then start the new file at 0."""
        prev = self.cur
        if prev is None:
            return
        self.drain(prev)
        exclude = {prev.ino, st.st_ino}
        for path, ino in self.successors(prev, exclude):
            nxt = self.open_at(path, ino, 0)
            if nxt is None:
                continue
            self.set_old(prev)
            self.cur = nxt
            self.event("rotated")
            self.drain(nxt)
            prev = nxt
        try:
            new = self.open_at(self.path, st.st_ino, 0)
        except OSError:
            new = None
        self.set_old(prev)
        if new is None:  # vanished between stat and open: keep the old one current
            self.cur, self.old = prev, None
            return
        self.cur = new
        self.event("rotated")

    # ---- start --------------------------------------------------------------------------------
    def start(self, ino, off, pino, poff, mode, last_n):
        if pino:
            old = self.find_inode(pino)
            if old is not None:
                old.reset(min(poff, os.fstat(old.fd).st_size))
                self.set_old(old)
        st = self.stat_path()
        if ino:
            if st is not None and st.st_ino == ino:
                self.cur = self.open_at(self.path, ino, 0)
                if self.cur is not None:
                    if st.st_size < off:
                        self.event("truncated")
                    else:
                        self.cur.reset(off)
                    self.event("opened")
                    return
            rotated = self.find_inode(ino)
            if rotated is not None:
                rotated.reset(min(off, os.fstat(rotated.fd).st_size))
                self.cur = rotated
                self.drain(rotated)
                if st is None:
                    return  # renamed, nothing new yet: keep reading it until a new file appears
                self.switch(st)
                return
            if st is None:
                self.event("waiting")
                return
            self.cur = self.open_at(self.path, st.st_ino, 0)
            self.event("rotated")
            return
        if st is None:
            self.event("waiting")
            return
        if mode == "begin":
            self.cur = self.open_at(self.path, st.st_ino, 0)
        else:
            fd = os.open(self.path, os.O_RDONLY)
            fst = os.fstat(fd)
            self.cur = Reader(fd, fst.st_ino, tail_offset(fd, fst.st_size, last_n))
        self.event("opened")

    # ---- loop ----------------------------------------------------------------------------------
    def step(self):
        """One pass; True if anything was read."""
        progressed = False
        if self.cur is not None:
            progressed = self.pump(self.cur)
        if self.old is not None:
            if self.pump(self.old):
                progressed = True
            elif time.monotonic() > self.old_deadline:
                self.old.close()
                self.old = None
        if progressed:
            return True
        st = self.stat_path()
        if self.cur is None:
            if st is not None:
                try:
                    self.cur = self.open_at(self.path, st.st_ino, 0)
                except OSError:
                    return False
                if self.cur is not None:
                    self.event("opened")
                    return True
            return False
        if st is not None and st.st_ino != self.cur.ino:
            self.switch(st)
            return True
        if st is not None and st.st_size < self.cur.read_end():
            self.cur.reset(0)
            self.event("truncated")
            return True
        return False


def stdin_closed(timeout):
    ready, _, _ = select.select([0], [], [], timeout)
    if not ready:
        return False
    try:
        return os.read(0, 4096) == b""
    except OSError:
        return True


def main(argv):
    path = argv[0]
    ino, off, pino, poff = (int(x) for x in argv[1:5])
    mode = argv[5] if len(argv) > 5 else "end"
    last_n = int(argv[6]) if len(argv) > 6 else 0
    fol = Follower(path)
    fol.start(ino, off, pino, poff, mode, last_n)
    fol.flush()
    idle = POLL_MIN
    while True:
        if fol.step():
            fol.flush()
            idle = POLL_MIN
            if stdin_closed(0):
                return
            continue
        fol.flush()
        if stdin_closed(idle):
            return
        idle = min(idle * 2, POLL_MAX)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    except OSError as exc:  # unreadable path, a directory...: one clear line for the client
        sys.stderr.write(f"cannot follow {exc.filename or sys.argv[1]}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(2)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    os._exit(0)
