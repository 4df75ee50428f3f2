/* opcheck: a randomized operation checker.
 *
 * A seeded generator drives random file operations that are applied identically to two
 * directories: --mount (the filesystem under test) and --ref (a plain directory on a trusted
 * filesystem). Results, errno values, sizes and contents must agree. After every step the
 * files the step touched are compared (read wholly through separate descriptors), and every
 * 100 steps every file and the directory listing are. The first difference is reported as
 *
 *   opcheck: FAIL seed=S step=N op=OP file=NAME offset=OFF
 *
 * with details, and the program exits 1. At the end it prints "opcheck: seed=S ops=N ok".
 * Every choice comes from the seed and from the reference directory's state, never from the
 * clock, so a failure replays with the same arguments.
 *
 * --inject-fault STEP flips one byte of a reference file at (or after) that step, to prove the
 * checker notices a difference: a run with it must end in FAIL.
 *
 * Uses only libc. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif
#ifndef FALLOC_FL_ZERO_RANGE
#define FALLOC_FL_ZERO_RANGE 0x10
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define MAX_NAMES 64
#define FDS_PER_INODE 3
#define MAX_SLOTS 48
#define MAX_INODES (MAX_NAMES + MAX_SLOTS + 4)
#define HISTORY 24
#define FULL_CHECK_EVERY 100

/* ---------------------------------------------------------------- generator */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. */
static uint64_t rng_below(uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = rng_next();
    while (x >= limit);
    return x % n;
}

/* Uniform in [lo, hi]. */
static uint64_t rng_range(uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + rng_below(hi - lo + 1);
}

static int rng_pct(unsigned pct)
{
    return rng_below(100) < pct;
}

/* ---------------------------------------------------------------- model */

typedef struct {
    int used;
    int name;          /* index into names, or -1 once unlinked or renamed over */
    int nfds;          /* open slots referring to it */
    unsigned serial;   /* for messages */
} inode_t;

typedef struct {
    int used;
    int ino;
    int mfd, rfd;
    int acc;           /* O_RDONLY, O_WRONLY or O_RDWR */
    int append;
} slot_t;

static struct {
    const char *mount, *ref;
    uint64_t seed, ops;
    int files;
    uint64_t max_size;
    uint64_t block;
    int verbose;
    int64_t inject_step;   /* -1: none */
} cfg;

static inode_t inodes[MAX_INODES];
static slot_t slots[MAX_SLOTS];
static int name_ino[MAX_NAMES];
static unsigned next_serial = 1;
static int mdir = -1, rdir = -1;
static uint64_t step;
static char history[HISTORY][320];
static unsigned hist_n;
static char cur_op[256];
static int inject_done;

static unsigned char *buf_data, *buf_m, *buf_r;
static size_t buf_cap;
static long page_size;

static void name_of(int n, char *out, size_t cap)
{
    snprintf(out, cap, "f%02d", n);
}

static const char *ino_label(int i)
{
    static char lab[4][48];
    static int which;
    char *s = lab[which++ & 3];
    if (i < 0)
        snprintf(s, 48, "(none)");
    else if (inodes[i].name >= 0)
        snprintf(s, 48, "f%02d", inodes[i].name);
    else
        snprintf(s, 48, "(unlinked#%u)", inodes[i].serial);
    return s;
}

static void note_op(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note_op(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cur_op, sizeof cur_op, fmt, ap);
    va_end(ap);
    snprintf(history[hist_n % HISTORY], sizeof history[0], "step %" PRIu64 ": %s", step, cur_op);
    hist_n++;
    if (cfg.verbose)
        fprintf(stderr, "opcheck: step %" PRIu64 ": %s\n", step, cur_op);
}

static void print_history(void)
{
    unsigned n = hist_n < HISTORY ? hist_n : HISTORY;
    fprintf(stderr, "opcheck: last %u operations:\n", n);
    for (unsigned k = hist_n - n; k < hist_n; k++)
        fprintf(stderr, "  %s\n", history[k % HISTORY]);
}

static void fail(const char *opname, const char *file, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
static void fail(const char *opname, const char *file, int64_t offset, const char *fmt, ...)
{
    printf("opcheck: FAIL seed=%" PRIu64 " step=%" PRIu64 " op=%s file=%s offset=%" PRId64 "\n",
           cfg.seed, step, opname, file, offset);
    va_list ap;
    va_start(ap, fmt);
    printf("opcheck: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    printf("opcheck: during: %s\n", cur_op);
    fflush(stdout);
    print_history();
    exit(1);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "opcheck: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static void ensure_buf(size_t len)
{
    if (len <= buf_cap)
        return;
    size_t cap = buf_cap ? buf_cap : 65536;
    while (cap < len)
        cap *= 2;
    buf_data = realloc(buf_data, cap);
    buf_m = realloc(buf_m, cap);
    buf_r = realloc(buf_r, cap);
    if (!buf_data || !buf_m || !buf_r)
        die("out of memory");
    buf_cap = cap;
}

/* Fills buf_data[0..len) with data of a random kind: random, zeros, text-like, runs. */
static const char *fill_data(size_t len)
{
    static const char *words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ",
                                  "lazy ", "dog\n", "lorem ", "ipsum ", "0x1f2e ", "ERROR ",
                                  "INFO ", "block ", "frame ", "seek "};
    ensure_buf(len);
    unsigned kind = (unsigned)rng_below(10);
    if (kind < 3) {
        for (size_t i = 0; i < len; i += 8) {
            uint64_t x = rng_next();
            size_t n = len - i < 8 ? len - i : 8;
            memcpy(buf_data + i, &x, n);
        }
        return "random";
    } else if (kind < 4) {
        memset(buf_data, 0, len);
        return "zeros";
    } else if (kind < 8) {
        size_t i = 0;
        uint64_t x = 0;
        int left = 0;
        while (i < len) {
            if (left == 0) {
                x = rng_next();
                left = 16;
            }
            const char *w = words[x & 15];
            x >>= 4;
            left--;
            size_t wl = strlen(w);
            if (wl > len - i)
                wl = len - i;
            memcpy(buf_data + i, w, wl);
            i += wl;
        }
        return "text";
    } else {
        size_t i = 0;
        while (i < len) {
            size_t run = (size_t)rng_range(1, 5000);
            if (run > len - i)
                run = len - i;
            memset(buf_data + i, (int)rng_below(256), run);
            i += run;
        }
        return "runs";
    }
}

/* ---------------------------------------------------------------- model helpers */

static int inode_new(int name)
{
    for (int i = 0; i < MAX_INODES; i++)
        if (!inodes[i].used) {
            inodes[i].used = 1;
            inodes[i].name = name;
            inodes[i].nfds = 0;
            inodes[i].serial = next_serial++;
            return i;
        }
    die("model: out of inodes");
}

static void inode_maybe_free(int i)
{
    if (i >= 0 && inodes[i].used && inodes[i].name < 0 && inodes[i].nfds == 0)
        inodes[i].used = 0;
}

static int count_slots(void)
{
    int n = 0;
    for (int s = 0; s < MAX_SLOTS; s++)
        n += slots[s].used;
    return n;
}

/* A random used slot matching the filter (0: any, 1: readable, 2: writable, 3: O_RDWR),
 * or -1. */
static int pick_slot(int filter)
{
    int cand[MAX_SLOTS], n = 0;
    for (int s = 0; s < MAX_SLOTS; s++) {
        if (!slots[s].used)
            continue;
        int acc = slots[s].acc;
        if (filter == 1 && acc == O_WRONLY)
            continue;
        if (filter == 2 && acc == O_RDONLY)
            continue;
        if (filter == 3 && acc != O_RDWR)
            continue;
        cand[n++] = s;
    }
    if (n == 0)
        return -1;
    return cand[rng_below((uint64_t)n)];
}

static int free_slot(void)
{
    for (int s = 0; s < MAX_SLOTS; s++)
        if (!slots[s].used)
            return s;
    return -1;
}

static void slot_release(int s)
{
    int i = slots[s].ino;
    slots[s].used = 0;
    inodes[i].nfds--;
    inode_maybe_free(i);
}

/* Size of the reference file behind a slot (the model's truth). */
static uint64_t ref_fsize(int s)
{
    struct stat st;
    if (fstat(slots[s].rfd, &st) != 0)
        die("fstat(ref): %s", strerror(errno));
    return (uint64_t)st.st_size;
}

static const char *errname(int ret, int err)
{
    static char b[2][64];
    static int w;
    char *s = b[w++ & 1];
    if (ret >= 0)
        snprintf(s, 64, "ok");
    else
        snprintf(s, 64, "errno %d (%s)", err, strerror(err));
    return s;
}

/* Compares the outcome of one call on both sides. */
static void same_result(const char *op, const char *file, int64_t off, long mret, int merr,
                        long rret, int rerr)
{
    if (mret != rret || (mret < 0 && merr != rerr))
        fail(op, file, off, "results differ: mount ret=%ld %s, ref ret=%ld %s", mret,
             errname(mret < 0 ? -1 : 0, merr), rret, errname(rret < 0 ? -1 : 0, rerr));
}

/* Reads [0,size) of both descriptors and compares; fails on the first difference. */
static void compare_fds(const char *op, const char *file, int mfd, int rfd, uint64_t size)
{
    const size_t chunk = 1 << 20;
    ensure_buf(chunk);
    uint64_t off = 0;
    while (off < size) {
        size_t want = size - off < chunk ? (size_t)(size - off) : chunk;
        size_t gm = 0, gr = 0;
        while (gm < want) {
            ssize_t n = pread(mfd, buf_m + gm, want - gm, (off_t)(off + gm));
            if (n < 0)
                fail(op, file, (int64_t)(off + gm), "read of mount file failed: %s",
                     strerror(errno));
            if (n == 0)
                break;
            gm += (size_t)n;
        }
        while (gr < want) {
            ssize_t n = pread(rfd, buf_r + gr, want - gr, (off_t)(off + gr));
            if (n < 0)
                die("read of ref file failed: %s", strerror(errno));
            if (n == 0)
                break;
            gr += (size_t)n;
        }
        size_t lim = gm < gr ? gm : gr;
        for (size_t k = 0; k < lim; k++)
            if (buf_m[k] != buf_r[k])
                fail(op, file, (int64_t)(off + k),
                     "content differs: first differing byte at offset %" PRIu64
                     ": mount=0x%02x ref=0x%02x (size %" PRIu64 ")",
                     off + k, buf_m[k], buf_r[k], size);
        if (gm != gr)
            fail(op, file, (int64_t)(off + lim),
                 "short read: mount gave %zu bytes, ref %zu bytes at offset %" PRIu64, gm, gr,
                 off);
        if (gm < want)
            fail(op, file, (int64_t)(off + gm),
                 "both files end early at offset %" PRIu64 " (size %" PRIu64 ")", off + gm,
                 size);
        off += want;
    }
    /* nothing past the end */
    char c;
    ssize_t nm = pread(mfd, &c, 1, (off_t)size);
    if (nm != 0)
        fail(op, file, (int64_t)size, "read at end of file (size %" PRIu64 ") gave %zd (%s)",
             size, nm, nm < 0 ? strerror(errno) : "data past the end");
}

/* Checks one inode: by name through fresh descriptors when it has a name, and through every
 * open slot (fstat sizes; content through a readable one when it has no name). */
static void check_inode(const char *op, int i)
{
    if (i < 0 || !inodes[i].used)
        return;
    const char *lab = ino_label(i);
    uint64_t want_size = 0;
    int have_size = 0;
    if (inodes[i].name >= 0) {
        char nm[16];
        name_of(inodes[i].name, nm, sizeof nm);
        int rfd = openat(rdir, nm, O_RDONLY);
        if (rfd < 0)
            die("model: ref %s should exist: %s", nm, strerror(errno));
        int mfd = openat(mdir, nm, O_RDONLY);
        if (mfd < 0)
            fail(op, nm, 0, "open(O_RDONLY) of the mount file failed: %s", strerror(errno));
        struct stat ms, rs;
        if (fstat(mfd, &ms) != 0)
            fail(op, nm, 0, "fstat of mount file failed: %s", strerror(errno));
        if (fstat(rfd, &rs) != 0)
            die("fstat(ref): %s", strerror(errno));
        if (!S_ISREG(ms.st_mode))
            fail(op, nm, 0, "mount file is not a regular file (mode %o)", (unsigned)ms.st_mode);
        if (ms.st_size != rs.st_size)
            fail(op, nm, (int64_t)ms.st_size,
                 "size differs: mount %" PRId64 " ref %" PRId64, (int64_t)ms.st_size,
                 (int64_t)rs.st_size);
        compare_fds(op, nm, mfd, rfd, (uint64_t)rs.st_size);
        want_size = (uint64_t)rs.st_size;
        have_size = 1;
        close(mfd);
        close(rfd);
    }
    int content_done = have_size;
    for (int s = 0; s < MAX_SLOTS; s++) {
        if (!slots[s].used || slots[s].ino != i)
            continue;
        struct stat ms, rs;
        if (fstat(slots[s].mfd, &ms) != 0)
            fail(op, lab, 0, "fstat of open mount descriptor failed: %s", strerror(errno));
        if (fstat(slots[s].rfd, &rs) != 0)
            die("fstat(ref): %s", strerror(errno));
        if (ms.st_size != rs.st_size)
            fail(op, lab, (int64_t)ms.st_size,
                 "size through an open descriptor differs: mount %" PRId64 " ref %" PRId64,
                 (int64_t)ms.st_size, (int64_t)rs.st_size);
        if (have_size && (uint64_t)rs.st_size != want_size)
            die("model: ref descriptor and ref name disagree for %s", lab);
        if (!content_done && slots[s].acc != O_WRONLY) {
            compare_fds(op, lab, slots[s].mfd, slots[s].rfd, (uint64_t)rs.st_size);
            content_done = 1;
        }
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(const char *path, char **out, int cap)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n < cap)
            out[n] = strdup(e->d_name);
        n++;
    }
    int err = errno;
    closedir(d);
    if (err)
        return -err;
    if (n > cap)
        n = cap;
    qsort(out, (size_t)n, sizeof *out, cmp_str);
    return n;
}

static void full_check(const char *op)
{
    /* directory listings */
    char *ml[MAX_NAMES * 2 + 16], *rl[MAX_NAMES * 2 + 16];
    int cap = MAX_NAMES * 2 + 16;
    int nm = list_dir(cfg.mount, ml, cap);
    if (nm < 0)
        fail(op, cfg.mount, 0, "readdir of mount failed: %s", strerror(-nm));
    int nr = list_dir(cfg.ref, rl, cap);
    if (nr < 0)
        die("readdir of ref failed: %s", strerror(-nr));
    int k = 0;
    for (; k < nm && k < nr; k++)
        if (strcmp(ml[k], rl[k]) != 0)
            break;
    if (k < nm || k < nr)
        fail(op, k < nm ? ml[k] : rl[k], 0,
             "directory listings differ (%d entries in mount, %d in ref): at entry %d mount "
             "has '%s', ref has '%s'",
             nm, nr, k, k < nm ? ml[k] : "(end)", k < nr ? rl[k] : "(end)");
    for (k = 0; k < nm; k++)
        free(ml[k]);
    for (k = 0; k < nr; k++)
        free(rl[k]);
    /* existence of every name */
    for (int n = 0; n < cfg.files; n++) {
        char nmb[16];
        name_of(n, nmb, sizeof nmb);
        struct stat ms, rs;
        int me = fstatat(mdir, nmb, &ms, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
        int re = fstatat(rdir, nmb, &rs, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
        if (me != re)
            fail(op, nmb, 0, "stat differs: mount %s, ref %s", me ? strerror(me) : "exists",
                 re ? strerror(re) : "exists");
        if ((name_ino[n] >= 0) != (re == 0))
            die("model: name %s existence disagrees with ref", nmb);
    }
    for (int i = 0; i < MAX_INODES; i++)
        if (inodes[i].used)
            check_inode(op, i);
}

/* ---------------------------------------------------------------- operations */

static uint64_t pick_offset(uint64_t size, uint64_t len)
{
    uint64_t max = cfg.max_size;
    uint64_t off;
    switch (rng_below(8)) {
    case 0: /* append */
        off = size;
        break;
    case 1: /* hole past the end */
        off = size + rng_range(1, cfg.block * 2);
        break;
    case 2: { /* near a block boundary */
        uint64_t nb = max / cfg.block + 1;
        uint64_t b = rng_below(nb) * cfg.block;
        off = b + rng_range(0, 2);
        off = off >= 1 ? off - 1 : off;
        break;
    }
    case 3: /* start */
        off = rng_below(16);
        break;
    case 4: /* anywhere in the allowed range */
        off = rng_below(max);
        break;
    default: /* inside the file */
        off = size ? rng_below(size) : 0;
        break;
    }
    if (off + len > max)
        off = max > len ? rng_below(max - len + 1) : 0;
    return off;
}

static uint64_t pick_len(void)
{
    switch (rng_below(10)) {
    case 0:
    case 1:
    case 2:
        return rng_range(1, 64);
    case 3:
    case 4:
        return rng_range(1, 4096);
    case 5:
    case 6:
        return rng_range(1, cfg.block + 1);
    case 7:
        return cfg.block;
    case 8:
        return rng_range(cfg.block, cfg.block * 4 + 7); /* a few blocks */
    default:
        return rng_range(4096, 3 * cfg.block);
    }
}

static int touched[4];
static int ntouched;

static void touch(int i)
{
    if (i >= 0 && ntouched < 4)
        touched[ntouched++] = i;
}

static void op_open(int reopen_slot)
{
    int n, s;
    int flags, acc;
    char nm[16];
    if (reopen_slot >= 0) {
        s = reopen_slot;
        n = inodes[slots[s].ino].name;
        int oldino = slots[s].ino;
        name_of(n, nm, sizeof nm);
        note_op("reopen %s (slot %d)", nm, s);
        int mr = close(slots[s].mfd), me = errno;
        int rr = close(slots[s].rfd), re = errno;
        slot_release(s);
        touch(oldino);
        same_result("close", nm, 0, mr, me, rr, re);
        acc = O_RDWR;
        flags = O_RDWR;
    } else {
        s = free_slot();
        n = (int)rng_below((uint64_t)cfg.files);
        name_of(n, nm, sizeof nm);
        unsigned a = (unsigned)rng_below(100);
        acc = a < 84 ? O_RDWR : a < 95 ? O_RDONLY : O_WRONLY;
        flags = acc;
        if (rng_pct(90))
            flags |= O_CREAT;
        if (acc != O_RDONLY && rng_pct(15))
            flags |= O_TRUNC;
        if (rng_pct(15))
            flags |= O_APPEND;
        if ((flags & O_CREAT) && rng_pct(5))
            flags |= O_EXCL;
        note_op("open %s flags=%s%s%s%s%s (slot %d)", nm,
                acc == O_RDWR ? "O_RDWR" : acc == O_RDONLY ? "O_RDONLY" : "O_WRONLY",
                flags & O_CREAT ? "|O_CREAT" : "", flags & O_TRUNC ? "|O_TRUNC" : "",
                flags & O_APPEND ? "|O_APPEND" : "", flags & O_EXCL ? "|O_EXCL" : "", s);
    }
    int mfd = openat(mdir, nm, flags | O_CLOEXEC, 0644);
    int me = errno;
    int rfd = openat(rdir, nm, flags | O_CLOEXEC, 0644);
    int re = errno;
    if ((mfd < 0) != (rfd < 0) || (mfd < 0 && me != re)) {
        if (mfd >= 0)
            close(mfd);
        if (rfd >= 0)
            close(rfd);
        fail("open", nm, 0, "results differ: mount %s, ref %s", errname(mfd, me),
             errname(rfd, re));
    }
    if (mfd < 0)
        return;
    int i = name_ino[n];
    if (i < 0) {
        i = inode_new(n);
        name_ino[n] = i;
    }
    slots[s].used = 1;
    slots[s].ino = i;
    slots[s].mfd = mfd;
    slots[s].rfd = rfd;
    slots[s].acc = acc;
    slots[s].append = (flags & O_APPEND) != 0;
    inodes[i].nfds++;
    touch(i);
}

static void op_close(int s)
{
    int i = slots[s].ino;
    note_op("close slot %d (%s)", s, ino_label(i));
    const char *lab = ino_label(i);
    int mr = close(slots[s].mfd), me = errno;
    int rr = close(slots[s].rfd), re = errno;
    slot_release(s);
    if (inodes[i].used)
        touch(i);
    same_result("close", lab, 0, mr, me, rr, re);
}

static void op_write(int s, int sequential)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    uint64_t size = ref_fsize(s);
    uint64_t len = pick_len();
    if (len > cfg.max_size)
        len = cfg.max_size;
    uint64_t off = pick_offset(size, len);
    if (slots[s].append && size + len > cfg.max_size) {
        /* O_APPEND writes land at the end: keep the file bounded by truncating first */
        uint64_t ns = cfg.max_size > len ? rng_below(cfg.max_size - len + 1) : 0;
        note_op("ftruncate %s (slot %d) to %" PRIu64 " before an append", lab, s, ns);
        int mr = ftruncate(slots[s].mfd, (off_t)ns), me = errno;
        int rr = ftruncate(slots[s].rfd, (off_t)ns), re = errno;
        same_result("ftruncate", lab, (int64_t)ns, mr, me, rr, re);
        touch(i);
        if (rr != 0)
            return;
    }
    const char *kind = fill_data((size_t)len);
    note_op("%s %s (slot %d%s) offset=%" PRIu64 " len=%" PRIu64 " data=%s size=%" PRIu64,
            sequential ? "lseek+write" : "pwrite", lab, s, slots[s].append ? ", O_APPEND" : "",
            off, len, kind, size);
    ssize_t mr, rr;
    int me, re;
    if (sequential) {
        off_t a = lseek(slots[s].mfd, (off_t)off, SEEK_SET);
        off_t b = lseek(slots[s].rfd, (off_t)off, SEEK_SET);
        if (a != b)
            fail("lseek", lab, (int64_t)off, "lseek results differ: mount %jd ref %jd",
                 (intmax_t)a, (intmax_t)b);
        mr = write(slots[s].mfd, buf_data, (size_t)len);
        me = errno;
        rr = write(slots[s].rfd, buf_data, (size_t)len);
        re = errno;
        if (mr >= 0 && rr >= 0) {
            off_t pa = lseek(slots[s].mfd, 0, SEEK_CUR);
            off_t pb = lseek(slots[s].rfd, 0, SEEK_CUR);
            if (pa != pb)
                fail("write", lab, (int64_t)off,
                     "file position after write differs: mount %jd ref %jd", (intmax_t)pa,
                     (intmax_t)pb);
        }
    } else {
        mr = pwrite(slots[s].mfd, buf_data, (size_t)len, (off_t)off);
        me = errno;
        rr = pwrite(slots[s].rfd, buf_data, (size_t)len, (off_t)off);
        re = errno;
    }
    touch(i);
    same_result(sequential ? "write" : "pwrite", lab, (int64_t)off, (long)mr, me, (long)rr, re);
}

static void op_read(int s)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    uint64_t size = ref_fsize(s);
    uint64_t len = pick_len();
    uint64_t off;
    switch (rng_below(4)) {
    case 0:
        off = size > len ? rng_below(size - len + 1) : 0;
        break;
    case 1:
        off = size + rng_below(100); /* at or past the end */
        break;
    default:
        off = size ? rng_below(size) : 0;
        break;
    }
    note_op("pread %s (slot %d) offset=%" PRIu64 " len=%" PRIu64 " size=%" PRIu64, lab, s, off,
            len, size);
    ensure_buf((size_t)len);
    ssize_t mr = pread(slots[s].mfd, buf_m, (size_t)len, (off_t)off);
    int me = errno;
    ssize_t rr = pread(slots[s].rfd, buf_r, (size_t)len, (off_t)off);
    int re = errno;
    same_result("pread", lab, (int64_t)off, (long)mr, me, (long)rr, re);
    for (ssize_t k = 0; k < rr; k++)
        if (buf_m[k] != buf_r[k])
            fail("pread", lab, (int64_t)(off + (uint64_t)k),
                 "content differs: first differing byte at offset %" PRIu64
                 ": mount=0x%02x ref=0x%02x",
                 off + (uint64_t)k, buf_m[k], buf_r[k]);
}

static void op_truncate(int s)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    uint64_t size = ref_fsize(s);
    uint64_t ns;
    switch (rng_below(6)) {
    case 0:
        ns = 0;
        break;
    case 1:
        ns = size ? rng_below(size) : 0; /* down */
        break;
    case 2:
        ns = size + rng_range(1, cfg.block * 2); /* up */
        break;
    case 3:
        ns = rng_below(cfg.max_size / cfg.block + 1) * cfg.block + rng_range(0, 2);
        ns = ns ? ns - 1 : 0;
        break;
    case 4:
        ns = size > 0 ? size - rng_range(1, size < 100 ? size : 100) : 0;
        break;
    default:
        ns = rng_below(cfg.max_size + 1);
        break;
    }
    if (ns > cfg.max_size)
        ns = cfg.max_size;
    note_op("ftruncate %s (slot %d) from %" PRIu64 " to %" PRIu64, lab, s, size, ns);
    int mr = ftruncate(slots[s].mfd, (off_t)ns), me = errno;
    int rr = ftruncate(slots[s].rfd, (off_t)ns), re = errno;
    touch(i);
    same_result("ftruncate", lab, (int64_t)ns, mr, me, rr, re);
}

static void op_fsync(int s)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    int data = rng_pct(30);
    note_op("%s %s (slot %d)", data ? "fdatasync" : "fsync", lab, s);
    int mr = data ? fdatasync(slots[s].mfd) : fsync(slots[s].mfd), me = errno;
    int rr = data ? fdatasync(slots[s].rfd) : fsync(slots[s].rfd), re = errno;
    touch(i);
    same_result(data ? "fdatasync" : "fsync", lab, 0, mr, me, rr, re);
}

static void op_fallocate(int s)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    uint64_t size = ref_fsize(s);
    uint64_t len = pick_len();
    if (len > cfg.max_size)
        len = cfg.max_size;
    uint64_t off = size && rng_pct(70) ? rng_below(size) : pick_offset(size, len);
    if (off + len > cfg.max_size)
        len = cfg.max_size - off;
    if (len == 0)
        len = 1, off = off ? off - 1 : 0;
    int mode;
    const char *mname;
    switch (rng_below(4)) {
    case 0:
        mode = 0;
        mname = "0";
        break;
    case 1:
        mode = FALLOC_FL_KEEP_SIZE;
        mname = "KEEP_SIZE";
        break;
    case 2:
        mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        mname = "PUNCH_HOLE|KEEP_SIZE";
        break;
    default:
        mode = FALLOC_FL_ZERO_RANGE;
        mname = "ZERO_RANGE";
        break;
    }
    note_op("fallocate %s (slot %d) mode=%s offset=%" PRIu64 " len=%" PRIu64 " size=%" PRIu64,
            lab, s, mname, off, len, size);
    int mr = fallocate(slots[s].mfd, mode, (off_t)off, (off_t)len), me = errno;
    int rr = fallocate(slots[s].rfd, mode, (off_t)off, (off_t)len), re = errno;
    touch(i);
    same_result("fallocate", lab, (int64_t)off, mr, me, rr, re);
}

static void op_mmap(int s)
{
    int i = slots[s].ino;
    const char *lab = ino_label(i);
    uint64_t size = ref_fsize(s);
    if (size == 0) {
        op_write(s, 0);
        return;
    }
    uint64_t off = rng_below(size);
    uint64_t len = pick_len();
    if (len > size - off)
        len = size - off;
    uint64_t pa = off & ~(uint64_t)(page_size - 1);
    size_t maplen = (size_t)(off + len - pa);
    const char *kind = fill_data((size_t)len);
    int do_sync = rng_pct(50);
    note_op("mmap-write %s (slot %d) offset=%" PRIu64 " len=%" PRIu64 " data=%s size=%" PRIu64
            "%s",
            lab, s, off, len, kind, size, do_sync ? " msync" : "");
    unsigned char *mm =
        mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, slots[s].mfd, (off_t)pa);
    int me = errno;
    unsigned char *rm =
        mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, slots[s].rfd, (off_t)pa);
    int re = errno;
    if ((mm == MAP_FAILED) != (rm == MAP_FAILED) || (mm == MAP_FAILED && me != re)) {
        fail("mmap", lab, (int64_t)pa, "mmap results differ: mount %s, ref %s",
             errname(mm == MAP_FAILED ? -1 : 0, me), errname(rm == MAP_FAILED ? -1 : 0, re));
    }
    if (mm == MAP_FAILED)
        return;
    /* what the mapping shows must match before writing */
    for (size_t k = 0; k < maplen; k++)
        if (mm[k] != rm[k])
            fail("mmap-read", lab, (int64_t)(pa + k),
                 "mapped content differs: first differing byte at offset %" PRIu64
                 ": mount=0x%02x ref=0x%02x",
                 pa + k, mm[k], rm[k]);
    memcpy(mm + (off - pa), buf_data, (size_t)len);
    memcpy(rm + (off - pa), buf_data, (size_t)len);
    if (do_sync) {
        int a = msync(mm, maplen, MS_SYNC), ae = errno;
        int b = msync(rm, maplen, MS_SYNC), be = errno;
        same_result("msync", lab, (int64_t)pa, a, ae, b, be);
    }
    int a = munmap(mm, maplen), ae = errno;
    int b = munmap(rm, maplen), be = errno;
    touch(i);
    same_result("munmap", lab, (int64_t)pa, a, ae, b, be);
}

static void op_rename(void)
{
    int a = (int)rng_below((uint64_t)cfg.files);
    int b = rng_pct(10) ? a : (int)rng_below((uint64_t)cfg.files);
    char an[16], bn[16];
    name_of(a, an, sizeof an);
    name_of(b, bn, sizeof bn);
    unsigned flags = 0;
    unsigned r = (unsigned)rng_below(100);
    if (r < 10)
        flags = RENAME_NOREPLACE;
    else if (r < 20)
        flags = RENAME_EXCHANGE;
    note_op("rename%s %s -> %s", flags == RENAME_NOREPLACE ? "(NOREPLACE)"
                                 : flags == RENAME_EXCHANGE ? "(EXCHANGE)"
                                                            : "",
            an, bn);
    int mr, rr, me, re;
    if (flags) {
        mr = renameat2(mdir, an, mdir, bn, flags);
        me = errno;
        rr = renameat2(rdir, an, rdir, bn, flags);
        re = errno;
    } else {
        mr = renameat(mdir, an, mdir, bn);
        me = errno;
        rr = renameat(rdir, an, rdir, bn);
        re = errno;
    }
    int ia = name_ino[a], ib = name_ino[b];
    touch(ia);
    touch(ib);
    same_result("rename", an, 0, mr, me, rr, re);
    if (rr != 0 || a == b)
        return;
    if (flags == RENAME_EXCHANGE) {
        name_ino[a] = ib;
        name_ino[b] = ia;
        if (ia >= 0)
            inodes[ia].name = b;
        if (ib >= 0)
            inodes[ib].name = a;
    } else {
        if (ib >= 0) {
            inodes[ib].name = -1;
            inode_maybe_free(ib);
        }
        name_ino[b] = ia;
        name_ino[a] = -1;
        if (ia >= 0)
            inodes[ia].name = b;
    }
    ntouched = 0;
    touch(ia);
    if (ib >= 0 && inodes[ib].used)
        touch(ib);
}

static void op_unlink(void)
{
    int a = (int)rng_below((uint64_t)cfg.files);
    char an[16];
    name_of(a, an, sizeof an);
    int ia = name_ino[a];
    note_op("unlink %s%s", an, ia >= 0 && inodes[ia].nfds ? " (open)" : "");
    int mr = unlinkat(mdir, an, 0), me = errno;
    int rr = unlinkat(rdir, an, 0), re = errno;
    same_result("unlink", an, 0, mr, me, rr, re);
    if (rr == 0) {
        name_ino[a] = -1;
        if (ia >= 0) {
            inodes[ia].name = -1;
            inode_maybe_free(ia);
            if (inodes[ia].used)
                touch(ia);
        }
    }
}

static void op_fstat(int s)
{
    int i = slots[s].ino;
    note_op("fstat %s (slot %d)", ino_label(i), s);
    touch(i);
}

/* A slot that passes filter, or -1 after closing some handle instead (the operation then has
 * nothing to act on). */
static int slot_or_close(int filter)
{
    int s = pick_slot(filter);
    if (s < 0)
        op_close(pick_slot(0));
    return s;
}

static void maybe_inject(void)
{
    if (cfg.inject_step < 0 || inject_done || (int64_t)step < cfg.inject_step)
        return;
    for (int n = 0; n < cfg.files; n++) {
        if (name_ino[n] < 0)
            continue;
        char nm[16];
        name_of(n, nm, sizeof nm);
        int fd = openat(rdir, nm, O_RDWR);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size > 0) {
            off_t at = st.st_size / 2;
            unsigned char c;
            if (pread(fd, &c, 1, at) == 1) {
                c ^= 0x5a;
                if (pwrite(fd, &c, 1, at) == 1) {
                    inject_done = 1;
                    fprintf(stderr,
                            "opcheck: injected fault at step %" PRIu64
                            ": flipped the ref byte of %s at offset %jd\n",
                            step, nm, (intmax_t)at);
                }
            }
        }
        close(fd);
        if (inject_done)
            return;
    }
}

static void do_step(void)
{
    ntouched = 0;
    cur_op[0] = 0;
    int nslots = count_slots();
    unsigned r = (unsigned)rng_below(100);
    int s;
    if (r < 12 || nslots == 0) {
        int i_full = 0;
        if (nslots >= MAX_SLOTS || nslots >= cfg.files * FDS_PER_INODE)
            i_full = 1;
        if (!i_full) {
            /* keep at most FDS_PER_INODE descriptors per name */
            uint64_t save = rng_state;
            int n = (int)rng_below((uint64_t)cfg.files);
            rng_state = save;
            if (name_ino[n] >= 0 && inodes[name_ino[n]].nfds >= FDS_PER_INODE)
                i_full = 1;
        }
        if (i_full) {
            op_close(pick_slot(0));
            return;
        }
        op_open(-1);
    } else if (r < 20) {
        op_close(pick_slot(0));
    } else if (r < 42) {
        if ((s = slot_or_close(2)) >= 0)
            op_write(s, 0);
    } else if (r < 47) {
        if ((s = slot_or_close(2)) >= 0)
            op_write(s, 1);
    } else if (r < 58) {
        if ((s = slot_or_close(1)) >= 0)
            op_read(s);
    } else if (r < 65) {
        if ((s = slot_or_close(2)) >= 0)
            op_truncate(s);
    } else if (r < 71) {
        op_rename();
    } else if (r < 76) {
        op_unlink();
    } else if (r < 81) {
        op_fsync(pick_slot(0));
    } else if (r < 88) {
        if ((s = slot_or_close(3)) >= 0)
            op_mmap(s);
    } else if (r < 92) {
        int cand[MAX_SLOTS], n = 0;
        for (int k = 0; k < MAX_SLOTS; k++)
            if (slots[k].used && inodes[slots[k].ino].name >= 0)
                cand[n++] = k;
        if (n == 0)
            op_close(pick_slot(0));
        else
            op_open(cand[rng_below((uint64_t)n)]);
    } else if (r < 96) {
        if ((s = slot_or_close(2)) >= 0)
            op_fallocate(s);
    } else {
        op_fstat(pick_slot(0));
    }
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: opcheck --mount DIR --ref DIR --seed N --ops N [--files K] "
            "[--max-size BYTES] [--block-size BYTES] [--inject-fault STEP] [--verbose]\n");
    exit(2);
}

static uint64_t parse_u64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s)
        die("bad number for %s: '%s'", what, s);
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    if (*end)
        die("bad number for %s: '%s'", what, s);
    return v;
}

int main(int argc, char **argv)
{
    cfg.files = 8;
    cfg.max_size = 1 << 20;
    cfg.block = 65536;
    cfg.inject_step = -1;
    int have_seed = 0, have_ops = 0;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        const char *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            cfg.verbose = 1;
            continue;
        }
        if (!v)
            usage();
        if (!strcmp(a, "--mount"))
            cfg.mount = v;
        else if (!strcmp(a, "--ref"))
            cfg.ref = v;
        else if (!strcmp(a, "--seed"))
            cfg.seed = parse_u64(v, a), have_seed = 1;
        else if (!strcmp(a, "--ops"))
            cfg.ops = parse_u64(v, a), have_ops = 1;
        else if (!strcmp(a, "--files"))
            cfg.files = (int)parse_u64(v, a);
        else if (!strcmp(a, "--max-size"))
            cfg.max_size = parse_u64(v, a);
        else if (!strcmp(a, "--block-size"))
            cfg.block = parse_u64(v, a);
        else if (!strcmp(a, "--inject-fault"))
            cfg.inject_step = (int64_t)parse_u64(v, a);
        else
            usage();
        k++;
    }
    if (!cfg.mount || !cfg.ref || !have_seed || !have_ops)
        usage();
    if (cfg.files < 1 || cfg.files > MAX_NAMES)
        die("--files must be 1..%d", MAX_NAMES);
    if (cfg.block < 512)
        die("--block-size too small");
    if (cfg.max_size < 4096)
        die("--max-size too small");
    page_size = sysconf(_SC_PAGESIZE);
    mdir = open(cfg.mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mdir < 0)
        die("cannot open --mount %s: %s", cfg.mount, strerror(errno));
    rdir = open(cfg.ref, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rdir < 0)
        die("cannot open --ref %s: %s", cfg.ref, strerror(errno));
    for (int n = 0; n < MAX_NAMES; n++)
        name_ino[n] = -1;
    /* start from no files of ours on either side */
    for (int n = 0; n < cfg.files; n++) {
        char nm[16];
        name_of(n, nm, sizeof nm);
        if (unlinkat(mdir, nm, 0) != 0 && errno != ENOENT)
            die("cannot remove %s/%s: %s", cfg.mount, nm, strerror(errno));
        if (unlinkat(rdir, nm, 0) != 0 && errno != ENOENT)
            die("cannot remove %s/%s: %s", cfg.ref, nm, strerror(errno));
    }
    rng_state = cfg.seed ^ UINT64_C(0x6f70636865636b21);
    ensure_buf(1 << 20);
    snprintf(cur_op, sizeof cur_op, "start");
    full_check("start");
    for (step = 1; step <= cfg.ops; step++) {
        do_step();
        char opn[32];
        snprintf(opn, sizeof opn, "%.31s", cur_op);
        char *sp = strchr(opn, ' ');
        if (sp)
            *sp = 0;
        for (int k = 0; k < ntouched; k++)
            check_inode(opn, touched[k]);
        int injected_now = 0;
        if (!inject_done) {
            maybe_inject();
            injected_now = inject_done;
        }
        if (step % FULL_CHECK_EVERY == 0 || injected_now)
            full_check(injected_now ? "check-after-inject" : "full-check");
    }
    step = cfg.ops;
    snprintf(cur_op, sizeof cur_op, "closing every descriptor");
    for (int s = 0; s < MAX_SLOTS; s++)
        if (slots[s].used) {
            int i = slots[s].ino;
            const char *lab = ino_label(i);
            int mr = close(slots[s].mfd), me = errno;
            int rr = close(slots[s].rfd), re = errno;
            slot_release(s);
            same_result("close", lab, 0, mr, me, rr, re);
        }
    full_check("final-check");
    if (cfg.inject_step >= 0 && !inject_done)
        die("--inject-fault %" PRId64 ": no file to corrupt was found", cfg.inject_step);
    printf("opcheck: seed=%" PRIu64 " ops=%" PRIu64 " ok\n", cfg.seed, cfg.ops);
    return 0;
}
