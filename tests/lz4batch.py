"""Many files through one stock `lz4 -d`: a process start costs more than decoding a small
file, so the tests' checks that backing files decode (and equal what the mount reads) run
one lz4 for many files. A separator frame of 32 random hex digits is decoded between each
two files, so that bytes moved from one file's end to the next file's start cannot go
unseen. Callers fall back to one lz4 a file to name a file that fails.

As a program (tests/integration/lib.sh, lz4_check and lz4_decodes):
    lz4batch.py check BACKING MNT WORKDIR   every regular file under MNT, read through MNT
                                            first, equals lz4 -d of BACKING/same path
    lz4batch.py decodes BACKING WORKDIR     every file of BACKING but the superblock decodes
Exits 0 only when all of them did, and lz4 said nothing of undecodable data."""
import os
import subprocess
import sys


def separator(work):
    """(path of the separator frame, the bytes it decodes to), made in work."""
    marker = os.urandom(16).hex().encode()
    path = os.path.join(work, ".lz4-separator")
    with open(path, "wb") as fh:
        subprocess.run(["lz4", "-q", "-c"], input=marker, stdout=fh, check=True)
    return path, marker


def decode(files, sep, keep_output=True):
    """One `lz4 -d -c -m` of the files with the separator after each one."""
    names = [n for f in files for n in (f, sep[0])]
    out = subprocess.PIPE if keep_output else subprocess.DEVNULL
    return subprocess.run(["lz4", "-d", "-c", "-m"] + names, stdout=out, stderr=subprocess.PIPE)


def joined(datas, sep):
    """What decode gives when file k decodes to datas[k]."""
    return b"".join(d + sep[1] for d in datas)


def _regular_files(top):
    return sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top)
                  for f in fs if os.path.isfile(os.path.join(d, f))
                  and not os.path.islink(os.path.join(d, f)))


def _batch_ok(b, m, batch, sep):
    lz = decode([os.path.join(b, r) for r, _ in batch], sep, keep_output=m is not None)
    ok = lz.returncode == 0 and b"undecodable" not in lz.stderr.lower()
    return ok and (m is None or lz.stdout == joined([d for _, d in batch], sep))


def _check_tree(b, m, work):
    """m is None: decodes only. Batches of about 32 MiB (backing and mount bytes)."""
    rels = _regular_files(m if m is not None else b)
    if m is None:
        rels = [r for r in rels if not r.startswith(".fpgalz4fs")]
    sep = separator(work)
    batch, size = [], 0
    for r in rels:
        data = None
        if m is not None:
            with open(os.path.join(m, r), "rb") as fh:
                data = fh.read()       # through the mount first: a torn file is repaired here
        batch.append((r, data))
        size += os.path.getsize(os.path.join(b, r)) + len(data or b"")
        if size >= 32 << 20:
            if not _batch_ok(b, m, batch, sep):
                return None
            batch, size = [], 0
    if batch and not _batch_ok(b, m, batch, sep):
        return None
    return len(rels)


def main(argv):
    mode, b, work = argv[1], argv[2], argv[-1]
    m = argv[3] if mode == "check" else None
    try:
        n = _check_tree(b, m, work)
    except OSError:
        n = None                       # a file missing or unreadable: the caller names it
    if n is None:
        return 1
    print("lz4_%s: %d files, all %s (one lz4 per 32 MiB)" % (
        mode, n, "equal to the mount" if m is not None else "decode"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
