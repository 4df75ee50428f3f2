/* bench_wl: the `workloads` part. Application-shaped writes (SQLite transactions, shell
 * appends, fsync'd appends, fio random writes, small edits) on fpgalz4fs, on libfuse's
 * passthrough_ll example and on plain ext4, side by side; what fpgalz4fs stored for each,
 * against the logical size and `lz4 -1` of the final content; a 100 GiB hole; and the bytes
 * the daemon writes for a 10-byte overwrite of a large file.
 *
 * Every run of every workload on every rival gets its own filesystem when it can (as root:
 * a fresh ext4 on a loop device) and its own mount, so no run pays for an earlier one. A
 * workload that fails on a rival is recorded as failed, the others go on, and the run's exit
 * status says so: a filesystem that is slow or large here must still be measured. */
#include "bench.h"
#include "sb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <lz4.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BN_WL_IMG_BYTES (8ull << 30)   /* sparse: only what is written takes space */
#define BN_WL_INODES 65536ul
#define BN_WL_LINE 65u                 /* a `>>` append: one log line */
#define BN_WL_REC 100u                 /* an fsync'd append, a SQLite row's text */
#define BN_WL_EDIT 10u
#define BN_WL_HUGE 999999999999999ll
#define BN_WL_TRUNC_WAIT_S 300.0       /* a truncate that takes longer is given up */
#define BN_WL_SETTLE_S 0.5             /* write_bytes unchanged this long: the daemon is done */
#define BN_WL_SETTLE_MAX_S 60.0
#define BN_WL_SEED 0x9E3779B97F4A7C15ull
#define BN_WL_PTK_OPTS "writeback,xattr,default_permissions"

/* rivals; BN_WR_PTK is passthrough_ll with the kernel settings fpgalz4fs mounts with
 * (writeback cache, extended attributes, the kernel's permission checks): what FUSE costs
 * when the kernel asks what it asks of fpgalz4fs */
enum { BN_WR_FS, BN_WR_FS64, BN_WR_PT, BN_WR_PTK, BN_WR_PLAIN, BN_WR_N };
enum { BN_WK_FS, BN_WK_PT, BN_WK_PLAIN };                         /* what a rival mounts */
enum {
    BN_WL_SQL_DEL, BN_WL_SQL_WAL, BN_WL_APPEND, BN_WL_APPEND_LOG, BN_WL_FSYNC,
    BN_WL_FSYNC_LOG, BN_WL_FIO, BN_WL_FIO_SYNC,
    BN_WL_EDITS, BN_WL_TREE_CP, BN_WL_TREE_TAR, BN_WL_TREE_STAT, BN_WL_TREE_DU, BN_WL_TREE_LS,
    BN_WL_TREE_GIT, BN_WL_TREE_RM, BN_WL_N,
};
#define BN_WL_TREE0 BN_WL_TREE_CP         /* the metadata rows: no stored-size targets */
_Static_assert(BN_WL_TREE_TAR - BN_WL_TREE0 == BN_TREE_TAR &&
                   BN_WL_TREE_GIT - BN_WL_TREE0 == BN_TREE_GIT &&
                   BN_WL_TREE_RM - BN_WL_TREE0 == BN_TREE_RM,
               "the metadata rows follow bench_tree.c's order");

typedef struct {
    int ok;
    long long logical, lz4;            /* through the mount */
    long long apparent, allocated;     /* the store's growth: st_size, st_blocks * 512 */
} bn_wl_size;

typedef struct {
    int ok;
    double secs;                       /* the ftruncate call alone */
    double close_secs;                 /* the close after it: the commit that writes the hole */
    int err, timed_out;                /* errno of the ftruncate (0: it worked) */
    long long apparent, allocated;     /* stat of the file, after close */
    long long store_alloc;             /* fpgalz4fs: the store's growth, both files */
    int huge_err, huge_timed_out;      /* the truncate to BN_WL_HUGE */
} bn_wl_hole;

typedef struct {
    int ok;
    long long at_fsync, at_close;      /* the daemon's write_bytes deltas */
    long long cblock;                  /* lz4 -1 of the edited block (fpgalz4fs) */
} bn_wl_wb;

struct bn_wl {
    bn_wl_cfg c;
    int failures;
    char why[512];                     /* the last failure, while it is recorded */
    char pt[BN_PATH], pt_src[BN_PATH]; /* the compiled passthrough_ll and its source */
    int fresh;                         /* a fresh ext4 per run */
    char setup[512];                   /* where the runs wrote, for fs.md */
    bn_loop loop;
    bn_mount m;
    int mounted;
    char base[BN_PATH];                /* the run's filesystem (fresh ext4 or a directory) */
    char dir[BN_PATH];                 /* where the workload writes */
    long long base_apparent, base_alloc;   /* the empty store, before the mount */
    char sql[2][BN_PATH], text[BN_PATH];
    char tree[BN_PATH], tree_tar[BN_PATH];   /* the metadata rows' source tree and its tar */
    char rname[BN_WR_N][64], wname[BN_WL_N][128], skipbuf[BN_WL_N][BN_WR_N][640];
    const char *rskip[BN_WR_N];        /* a rival that cannot run, and why */
    bn_series s[BN_WL_N][BN_WR_N];
    bn_wl_size size[BN_WL_N][2];       /* the two fpgalz4fs stores, last round */
    bn_wl_hole hole[BN_WR_N];
    bn_wl_wb wb[BN_WR_N];
    const char *hole_skip, *wb_skip;   /* the holes and write_bytes parts not run: why */
    bn_target t[BN_MAX_TARGETS];
    char tname[BN_MAX_TARGETS][192], ttag[BN_MAX_TARGETS][48];
    size_t nt;
};

typedef int (*bn_wl_fn)(bn_wl *w, double *secs, double *rate);

static int bn_wl_sql_delete(bn_wl *w, double *secs, double *rate);
static int bn_wl_sql_wal(bn_wl *w, double *secs, double *rate);
static int bn_wl_appends(bn_wl *w, double *secs, double *rate);
static int bn_wl_append_log(bn_wl *w, double *secs, double *rate);
static int bn_wl_fsyncs(bn_wl *w, double *secs, double *rate);
static int bn_wl_fsync_log(bn_wl *w, double *secs, double *rate);
static int bn_wl_fio(bn_wl *w, double *secs, double *rate);
static int bn_wl_fio_sync(bn_wl *w, double *secs, double *rate);
static int bn_wl_edits(bn_wl *w, double *secs, double *rate);

static const struct {
    const char *tag, *unit, *tool;     /* tool: needed on PATH, else the row is skipped */
    bn_wl_fn run;                      /* NULL: a metadata row (bn_wl_tree) */
    double speed_goal;                 /* fpgalz4fs / passthrough_ll at least; 0: none */
} bn_wl_kinds[BN_WL_N] = {
    [BN_WL_SQL_DEL] = {"sqlite-delete", "tx/s", "sqlite3", bn_wl_sql_delete, 0.7},
    [BN_WL_SQL_WAL] = {"sqlite-wal", "tx/s", "sqlite3", bn_wl_sql_wal, 0.7},
    [BN_WL_APPEND] = {"append", "appends/s", NULL, bn_wl_appends, 0.5},
    [BN_WL_APPEND_LOG] = {"append-log", "appends/s", NULL, bn_wl_append_log, 0.5},
    [BN_WL_FSYNC] = {"fsync-append", "appends/s", NULL, bn_wl_fsyncs, 0.5},
    [BN_WL_FSYNC_LOG] = {"fsync-append-log", "appends/s", NULL, bn_wl_fsync_log, 0.5},
    [BN_WL_FIO] = {"fio", "IOPS", "fio", bn_wl_fio, 0.5},
    [BN_WL_FIO_SYNC] = {"fio-fsync32", "IOPS", "fio", bn_wl_fio_sync, 0.5},
    [BN_WL_EDITS] = {"edits", "edits/s", NULL, bn_wl_edits, 0},
    /* the small-files issue: at most 1.1 x passthrough_ll's time */
    [BN_WL_TREE_CP] = {"tree-cp", "files/s", NULL, NULL, 1 / 1.1},
    [BN_WL_TREE_TAR] = {"tree-tar", "files/s", NULL, NULL, 1 / 1.1},
    [BN_WL_TREE_STAT] = {"tree-stat", "files/s", NULL, NULL, 1 / 1.1},
    [BN_WL_TREE_DU] = {"tree-du", "files/s", NULL, NULL, 1 / 1.1},
    [BN_WL_TREE_LS] = {"tree-ls", "files/s", NULL, NULL, 1 / 1.1},
    [BN_WL_TREE_GIT] = {"tree-git", "files/s", "git", NULL, 1 / 1.1},
    [BN_WL_TREE_RM] = {"tree-rm", "files/s", NULL, NULL, 1 / 1.1},
};

static int bn_wl_kind(int r)
{
    return r == BN_WR_PT || r == BN_WR_PTK ? BN_WK_PT : r == BN_WR_PLAIN ? BN_WK_PLAIN
                                                                     : BN_WK_FS;
}

static uint32_t bn_wl_block(const bn_wl *w, int r)
{
    return r == BN_WR_FS64 ? 64u * 1024u : w->c.block;
}

/* Whether rival r runs the holes or write_bytes rows (skip: why the row is not run at all):
 * passthrough_ll with fpgalz4fs's kernel settings is there for the speed rows only. */
static int bn_wl_side_row(const bn_wl *w, int r, const char *skip)
{
    return !w->rskip[r] && !skip && r != BN_WR_PTK;
}

/* Records why the current run failed (printf-style); -1. */
static int bn_wl_why(bn_wl *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
    return -1;
}

/* xorshift64*: the same offsets and texts for every rival. */
static uint64_t bn_wl_rand(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* len characters of text for record i (words, no quote), then a NUL. */
static void bn_wl_text(unsigned i, char *out, size_t len)
{
    static const char *words[] = {"request", "served", "user", "session", "cache", "miss",
                                  "status", "ok", "latency", "ms", "retry", "backend",
                                  "commit", "index", "page", "token"};
    uint64_t s = BN_WL_SEED ^ ((uint64_t)i + 1) * 0x100000001B3ull;
    size_t n = (size_t)snprintf(out, len + 1, "row %06u", i);
    while (n < len) {
        const char *wd = words[bn_wl_rand(&s) % (sizeof(words) / sizeof(words[0]))];
        n += (size_t)snprintf(out + n, len + 1 - n, " %s", wd);
    }
    out[len] = '\0';
}

/* A record of len bytes ending in a newline (the appends). */
static void bn_wl_line(unsigned i, char *out, size_t len)
{
    bn_wl_text(i, out, len - 1);
    out[len - 1] = '\n';
}

/* ---- reading back: every timed output is checked outside the timed region ---- */

static uint8_t *bn_wl_slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    uint8_t *buf = bn_alloc((size_t)st.st_size);
    size_t got = 0;
    for (ssize_t n = 1; got < (size_t)st.st_size && n > 0; got += n > 0 ? (size_t)n : 0)
        n = read(fd, buf + got, (size_t)st.st_size - got);
    close(fd);
    *len = got;
    return buf;
}

static int bn_wl_same_buf(const char *path, const uint8_t *want, size_t len)
{
    size_t got = 0;
    uint8_t *buf = bn_wl_slurp(path, &got);
    int same = buf && got == len && memcmp(buf, want, len) == 0;
    free(buf);
    return same;
}

/* The file holds n records of len bytes, record i being bn_wl_line(i). */
static int bn_wl_check_n(bn_wl *w, const char *path, size_t len, unsigned n)
{
    size_t got = 0;
    uint8_t *buf = bn_wl_slurp(path, &got);
    char rec[BN_WL_REC + 2];
    int ok = buf && got == (size_t)n * len;
    for (unsigned i = 0; ok && i < n; i++) {
        bn_wl_line(i, rec, len);
        ok = memcmp(buf + (size_t)i * len, rec, len) == 0;
    }
    free(buf);
    return ok ? 0 : bn_wl_why(w, "VERIFY FAILED: %s holds %zu bytes, not the %u records "
                              "written", path, got, n);
}

/* ---- SQLite: one-row transactions through the sqlite3 shell ---- */

/* The timed script: the journal mode (printed back), then one INSERT per transaction. */
static int bn_wl_sql_script(bn_wl *w, int wal)
{
    FILE *f = fopen(w->sql[wal], "w");
    char text[BN_WL_REC + 1];
    if (!f)
        return bn_fail(strerror(errno), w->sql[wal]);
    fprintf(f, "PRAGMA journal_mode=%s;\n", wal ? "WAL" : "DELETE");
    for (unsigned i = 0; i < w->c.ops; i++) {
        bn_wl_text(i, text, BN_WL_REC);
        fprintf(f, "INSERT INTO t(v) VALUES('%s');\n", text);
    }
    return fclose(f) == 0 ? 0 : bn_fail(strerror(errno), w->sql[wal]);
}

/* The first line of FILE, without its newline. */
static void bn_wl_first_line(const char *file, char *out, size_t cap)
{
    FILE *f = fopen(file, "r");
    out[0] = '\0';
    if (f && fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = '\0';
    if (f)
        fclose(f);
}

static int bn_wl_sql(bn_wl *w, int wal, double *secs, double *rate)
{
    char db[BN_PATH], out[BN_PATH], line[128], setup[128], rd[BN_PATH + 16];
    bn_path(db, w->dir, "t.db");
    bn_path(out, w->c.work, "wl-sqlite.out");
    snprintf(setup, sizeof(setup), "PRAGMA journal_mode=%s; CREATE TABLE t(id INTEGER "
             "PRIMARY KEY, v TEXT);", wal ? "WAL" : "DELETE");
    snprintf(rd, sizeof(rd), ".read '%s'", w->sql[wal]);
    char *mk[] = {"sqlite3", db, setup, NULL};
    char *run[] = {"sqlite3", "-bail", db, rd, NULL};
    char *count[] = {"sqlite3", db, "SELECT count(*) FROM t;", NULL};
    if (bn_run(mk, NULL, NULL) != 0)
        return bn_wl_why(w, "sqlite3 could not create %s", db);
    if (bn_run(run, out, secs) != 0)
        return bn_wl_why(w, "sqlite3 failed during the transactions on %s", db);
    bn_wl_first_line(out, line, sizeof(line));
    if (strcmp(line, wal ? "wal" : "delete") != 0)
        return bn_wl_why(w, "journal_mode=%s was refused: sqlite3 says '%s'",
                         wal ? "WAL" : "DELETE", line);
    if (bn_run(count, out, NULL) != 0)
        return bn_wl_why(w, "sqlite3 cannot read %s back", db);
    bn_wl_first_line(out, line, sizeof(line));
    if (strtoul(line, NULL, 10) != w->c.ops)
        return bn_wl_why(w, "VERIFY FAILED: %s holds %s rows, not %u", db, line, w->c.ops);
    *rate = w->c.ops / *secs;
    return 0;
}

static int bn_wl_sql_delete(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_sql(w, 0, secs, rate);
}

static int bn_wl_sql_wal(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_sql(w, 1, secs, rate);
}

/* ---- appends ---- */

/* `echo LINE >> path` for lines [from, to): open(O_APPEND), one write, close; timed. */
static int bn_wl_append_lines(bn_wl *w, const char *path, unsigned from, unsigned to,
                              double *secs, double *rate)
{
    char line[BN_WL_LINE + 1];
    double t0 = bn_clock(CLOCK_MONOTONIC);
    for (unsigned i = from; i < to; i++) {
        bn_wl_line(i, line, BN_WL_LINE);   /* a few hundred ns: inside, as a shell's echo */
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd < 0)
            return bn_wl_why(w, "open %s: %s", path, strerror(errno));
        ssize_t n = write(fd, line, BN_WL_LINE);
        int cl = close(fd);
        if (n != (ssize_t)BN_WL_LINE || cl != 0)
            return bn_wl_why(w, "append %u to %s: %s", i, path, strerror(errno));
    }
    *secs = bn_clock(CLOCK_MONOTONIC) - t0;
    *rate = (to - from) / *secs;
    return 0;
}

/* A log that already holds BN_WL_LOG_BYTES of records of len bytes (written at once, not
 * timed): its last block is about half full at 64 KiB and at 1 MiB blocks, where a log
 * spends most of its life, instead of empty as in a new file. The records it holds. */
#define BN_WL_LOG_BYTES ((7u << 19) + (32u << 10))
static int bn_wl_log_fill(bn_wl *w, const char *path, unsigned len, unsigned *have)
{
    char rec[BN_WL_REC + 1];
    *have = BN_WL_LOG_BYTES / len;
    FILE *f = fopen(path, "w");
    for (unsigned i = 0; f && i < *have; i++) {
        bn_wl_line(i, rec, len);
        fwrite(rec, 1, len, f);
    }
    if (!f || fclose(f) != 0)
        return bn_wl_why(w, "write %s: %s", path, strerror(errno));
    return 0;
}

/* Records [from, to) of BN_WL_REC bytes appended to path through one descriptor, each
 * followed by fsync; timed with the open and the close. */
static int bn_wl_fsync_recs(bn_wl *w, const char *path, unsigned from, unsigned to,
                            double *secs, double *rate)
{
    char rec[BN_WL_REC + 1];
    double t0 = bn_clock(CLOCK_MONOTONIC);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return bn_wl_why(w, "open %s: %s", path, strerror(errno));
    for (unsigned i = from; i < to; i++) {
        bn_wl_line(i, rec, BN_WL_REC);
        if (write(fd, rec, BN_WL_REC) != (ssize_t)BN_WL_REC || fsync(fd) != 0) {
            bn_wl_why(w, "append %u with fsync to %s: %s", i, path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (close(fd) != 0)
        return bn_wl_why(w, "close %s: %s", path, strerror(errno));
    *secs = bn_clock(CLOCK_MONOTONIC) - t0;
    *rate = (to - from) / *secs;
    return 0;
}

/* How a row appends records [from, to) of len bytes to path, timed. */
typedef int (*bn_wl_recs_fn)(bn_wl *w, const char *path, unsigned from, unsigned to,
                             double *secs, double *rate);

/* ops records of len bytes appended by run to the file name, new or (log) a log that holds
 * BN_WL_LOG_BYTES already, then read back. */
static int bn_wl_append_run(bn_wl *w, const char *name, unsigned len, int log, bn_wl_recs_fn run,
                            double *secs, double *rate)
{
    char path[BN_PATH];
    unsigned have = 0;
    bn_path(path, w->dir, name);
    int rc = log ? bn_wl_log_fill(w, path, len, &have) : 0;
    if (rc == 0)
        rc = run(w, path, have, have + w->c.ops, secs, rate);
    return rc ? rc : bn_wl_check_n(w, path, len, have + w->c.ops);
}

/* ops `>>` appends to a new file, and to a log that is not new. */
static int bn_wl_appends(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_append_run(w, "app.log", BN_WL_LINE, 0, bn_wl_append_lines, secs, rate);
}

static int bn_wl_append_log(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_append_run(w, "big.log", BN_WL_LINE, 1, bn_wl_append_lines, secs, rate);
}

/* One open file, ops appends of BN_WL_REC bytes, each followed by fsync: a new file, and a
 * log that is not new. */
static int bn_wl_fsyncs(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_append_run(w, "journal.dat", BN_WL_REC, 0, bn_wl_fsync_recs, secs, rate);
}

static int bn_wl_fsync_log(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_append_run(w, "synced.log", BN_WL_REC, 1, bn_wl_fsync_recs, secs, rate);
}

/* ---- fio: 4 KiB random writes ---- */

/* The write IOPS of fio's JSON output: "iops" after the first "write" object. */
static double bn_wl_fio_iops(const char *json)
{
    size_t len = 0;
    char *buf = (char *)bn_wl_slurp(json, &len), *p = NULL;
    double iops = -1;
    if (!buf)
        return -1;
    buf[len ? len - 1 : 0] = '\0';      /* the last byte is a newline or a brace */
    if ((p = strstr(buf, "\"write\"")) && (p = strstr(p, "\"iops\"")) && (p = strchr(p, ':')))
        iops = strtod(p + 1, NULL);
    free(buf);
    return iops;
}

static int bn_wl_fio_run(bn_wl *w, int sync, double *secs, double *rate)
{
    char fname[BN_PATH + 16], size[32], runtime[32], json[BN_PATH], out[BN_PATH + 16];
    char path[BN_PATH];
    bn_path(path, w->dir, "fio.dat");
    bn_path(json, w->c.work, "wl-fio.json");
    snprintf(fname, sizeof(fname), "--filename=%s", path);
    snprintf(out, sizeof(out), "--output=%s", json);
    snprintf(size, sizeof(size), "--size=%um", w->c.file_mib);
    snprintf(runtime, sizeof(runtime), "--runtime=%u", w->c.fio_secs);
    char *argv[] = {"fio", "--name=wl", fname, "--rw=randwrite", "--bs=4k", size,
                    "--ioengine=psync", runtime, "--time_based", "--randrepeat=1",
                    "--buffer_compress_percentage=60", "--refill_buffers", "--invalidate=0",
                    "--output-format=json", out, sync ? "--fsync=32" : NULL, NULL};
    if (bn_run(argv, NULL, secs) != 0)
        return bn_wl_why(w, "fio failed on %s", path);
    *rate = bn_wl_fio_iops(json);
    if (*rate <= 0)
        return bn_wl_why(w, "no write IOPS in fio's output %s", json);
    if (bn_size(path) != (off_t)w->c.file_mib * BN_MIB)
        return bn_wl_why(w, "VERIFY FAILED: %s is %lld bytes after fio, not %u MiB", path,
                         (long long)bn_size(path), w->c.file_mib);
    return 0;
}

static int bn_wl_fio(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_fio_run(w, 0, secs, rate);
}

static int bn_wl_fio_sync(bn_wl *w, double *secs, double *rate)
{
    return bn_wl_fio_run(w, 1, secs, rate);
}

/* ---- small edits: 10 bytes at random offsets of a large text file, close after each ---- */

static int bn_wl_edit_loop(bn_wl *w, const char *path, uint8_t *model, size_t len)
{
    uint64_t seed = BN_WL_SEED;
    char patch[BN_WL_EDIT + 1];
    for (unsigned i = 0; i < w->c.edits; i++) {
        off_t at = (off_t)(bn_wl_rand(&seed) % (len - BN_WL_EDIT));
        snprintf(patch, sizeof(patch), "EDIT%06u", i % 1000000u);
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            return bn_wl_why(w, "open %s: %s", path, strerror(errno));
        ssize_t n = pwrite(fd, patch, BN_WL_EDIT, at);
        int cl = close(fd);
        if (n != (ssize_t)BN_WL_EDIT || cl != 0)
            return bn_wl_why(w, "edit %u of %s: %s", i, path, strerror(errno));
        memcpy(model + at, patch, BN_WL_EDIT);
    }
    return 0;
}

static int bn_wl_edits(bn_wl *w, double *secs, double *rate)
{
    char path[BN_PATH];
    size_t len = 0;
    bn_path(path, w->dir, "edit.txt");
    char *cp[] = {"cp", w->text, path, NULL};
    uint8_t *model = bn_wl_slurp(w->text, &len);
    if (!model || len <= BN_WL_EDIT || bn_run(cp, NULL, NULL) != 0) {
        free(model);
        return bn_wl_why(w, "cannot copy %s to %s", w->text, path);
    }
    double t0 = bn_clock(CLOCK_MONOTONIC);
    int rc = bn_wl_edit_loop(w, path, model, len);
    *secs = bn_clock(CLOCK_MONOTONIC) - t0;
    *rate = w->c.edits / *secs;
    if (rc == 0 && !bn_wl_same_buf(path, model, len))
        rc = bn_wl_why(w, "VERIFY FAILED: %s differs from its source with the edits", path);
    free(model);
    return rc;
}

/* ---- a rival's filesystem and mount, one per run ---- */

/* nftw passes no context to its callback: the sums live here, only for bn_wl_store_sum. */
static _Thread_local long long bn_wl_nftw_apparent, bn_wl_nftw_alloc;

static int bn_wl_sum_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (flag == FTW_F && S_ISREG(st->st_mode)) {
        bn_wl_nftw_apparent += (long long)st->st_size;
        bn_wl_nftw_alloc += (long long)st->st_blocks * 512;
    }
    return 0;
}

/* Every regular file of the store (data, metadata, whatever the format keeps). */
static void bn_wl_store_sum(const char *dir, long long *apparent, long long *alloc)
{
    bn_wl_nftw_apparent = 0, bn_wl_nftw_alloc = 0;
    nftw(dir, bn_wl_sum_one, 64, FTW_PHYS);
    *apparent = bn_wl_nftw_apparent, *alloc = bn_wl_nftw_alloc;
}

static int bn_wl_base(bn_wl *w)
{
    if (w->fresh) {
        if (bn_loop_up(&w->loop, BN_WL_IMG_BYTES, BN_WL_INODES) != 0)
            return bn_wl_why(w, "cannot make a fresh ext4 in %s", w->loop.img);
        snprintf(w->base, sizeof(w->base), "%s", w->loop.dir);
        return 0;
    }
    bn_path(w->base, w->c.work, "wl-shared");
    bn_rm_rf(w->base);
    return bn_mkdirs(w->base) == 0 ? 0 : bn_wl_why(w, "%s: %s", w->base, strerror(errno));
}

static int bn_wl_mount_fs(bn_wl *w, int r)
{
    char *mkfs[] = {(char *)w->c.mkfs, "-b", (char *)sb_block_size_name(bn_wl_block(w, r)),
                    w->m.backing, NULL};
    if (bn_mkdirs(w->m.backing) != 0 || bn_run(mkfs, NULL, NULL) != 0)
        return bn_wl_why(w, "mkfpgalz4fs failed on %s", w->m.backing);
    bn_wl_store_sum(w->m.backing, &w->base_apparent, &w->base_alloc);
    bn_path(w->m.log, w->c.work, "wl-daemon.log");
    char opts[512];
    snprintf(opts, sizeof(opts), "engine=sw%s%s", w->c.fs_opts ? "," : "",
             w->c.fs_opts ? w->c.fs_opts : "");
    return bn_mount_up(&w->m, w->c.daemon, opts) == 0
               ? 0 : bn_wl_why(w, "the daemon did not mount %s", w->m.mnt);
}

static int bn_wl_mount_pt(bn_wl *w, int r)
{
    char opts[BN_PATH + 64];
    if (bn_mkdirs(w->m.backing) != 0)
        return bn_wl_why(w, "%s: %s", w->m.backing, strerror(errno));
    snprintf(opts, sizeof(opts), "source=%s%s", w->m.backing,
             r == BN_WR_PTK ? "," BN_WL_PTK_OPTS : "");
    bn_path(w->m.log, w->c.work, "wl-passthrough_ll.log");
    return bn_mount_up_rival(&w->m, w->pt, opts) == 0
               ? 0 : bn_wl_why(w, "passthrough_ll did not mount %s", w->m.mnt);
}

/* The run's filesystem, the rival's mount on it, and an empty directory w->dir to work in. */
static int bn_wl_up(bn_wl *w, int r)
{
    int kind = bn_wl_kind(r), rc;
    if (bn_wl_base(w) != 0)
        return -1;
    bn_path(w->m.backing, w->base, kind == BN_WK_FS ? "store" : "pt");
    if (kind == BN_WK_PLAIN)
        rc = 0;
    else
        rc = kind == BN_WK_FS ? bn_wl_mount_fs(w, r) : bn_wl_mount_pt(w, r);
    w->mounted = rc == 0 && kind != BN_WK_PLAIN;
    bn_path(w->dir, kind == BN_WK_PLAIN ? w->base : w->m.mnt, "w");
    if (rc == 0 && mkdir(w->dir, 0755) != 0)
        rc = bn_wl_why(w, "mkdir %s: %s", w->dir, strerror(errno));
    return rc;
}

static int bn_wl_unmount(bn_wl *w)
{
    if (!w->mounted)
        return 0;
    w->mounted = 0;
    return bn_mount_down(&w->m) == 0 ? 0 : bn_wl_why(w, "%s did not unmount cleanly", w->m.mnt);
}

static int bn_wl_release(bn_wl *w)
{
    if (!w->fresh)
        return bn_rm_rf(w->base) == 0 ? 0 : bn_wl_why(w, "cannot remove %s", w->base);
    return bn_loop_down(&w->loop) == 0 ? 0 : bn_wl_why(w, "%s did not unmount", w->loop.dir);
}

/* unmount, then the loop filesystem; the first failure's reason is kept. */
static int bn_wl_down(bn_wl *w)
{
    char keep[sizeof(w->why)];
    snprintf(keep, sizeof(keep), "%s", w->why);
    int rc = bn_wl_unmount(w);
    rc |= bn_wl_release(w);
    if (keep[0])
        snprintf(w->why, sizeof(w->why), "%s", keep);
    return rc;
}

/* ---- the metadata rows: commands over a tree of small files (bench_tree.c) ---- */

static int bn_wl_tree(bn_wl *w, int op, double *secs, double *rate)
{
    if (bn_tree_run(op, w->tree, w->tree_tar, w->dir, secs) != 0)
        return bn_wl_why(w, "%s failed in %s", bn_wl_kinds[BN_WL_TREE0 + op].tag, w->dir);
    *rate = w->c.tree_files / *secs;
    return 0;
}

/* ---- stored size: through the mount before the unmount, the store after it ---- */

static long long bn_wl_lz4(bn_wl *w, const char *path, uint32_t block)
{
    char out[BN_PATH];
    bn_path(out, w->c.work, "wl.lz4");
    /* -q first: lz4 reports the block size while it reads -B, unless already quiet */
    char *argv[] = {"lz4", "-q", "-1", (char *)bn_lz4_bsize(block), "-BX", "--no-frame-crc",
                    "-c", (char *)path, NULL};
    if (bn_run(argv, out, NULL) != 0)
        return -1;
    long long n = (long long)bn_size(out);
    unlink(out);
    return n;
}

/* Logical size and lz4 -1 of every file the workload left, read through the mount. */
static int bn_wl_size_mnt(bn_wl *w, bn_wl_size *z, uint32_t block)
{
    DIR *d = opendir(w->dir);
    struct dirent *e;
    char path[BN_PATH];
    struct stat st;
    z->logical = z->lz4 = 0;
    if (!d)
        return bn_wl_why(w, "opendir %s: %s", w->dir, strerror(errno));
    while ((e = readdir(d))) {
        bn_path(path, w->dir, e->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        long long c = bn_wl_lz4(w, path, block);
        if (c < 0) {
            closedir(d);
            return bn_wl_why(w, "lz4 -1 of %s failed", path);
        }
        z->logical += (long long)st.st_size, z->lz4 += c;
    }
    closedir(d);
    return 0;
}

static void bn_wl_size_store(bn_wl *w, bn_wl_size *z)
{
    long long ap, al;
    bn_wl_store_sum(w->m.backing, &ap, &al);
    z->apparent = ap - w->base_apparent, z->allocated = al - w->base_alloc;
    z->ok = 1;
}

/* ---- one run: workload k on rival r ---- */

static void bn_wl_failed(bn_wl *w, int k, int r, unsigned round)
{
    snprintf(w->skipbuf[k][r], sizeof(w->skipbuf[k][r]), "FAILED in round %u: %s", round + 1,
             w->why[0] ? w->why : "see stderr");
    w->s[k][r].skip = w->skipbuf[k][r];
    w->failures++;
    fprintf(stderr, BN_NAME ": workload %s on %s %s\n", bn_wl_kinds[k].tag, w->rname[r],
            w->s[k][r].skip);
}

static void bn_wl_record(bn_series *s, double secs, double rate)
{
    s->secs[s->n] = secs, s->rate[s->n] = rate;
    fprintf(stderr, "  %-52s %-16s round %u: %8.2f s %11.1f %s\n", s->row, s->rival,
            s->n + 1, secs, rate, s->unit);
    s->n++;
}

static void bn_wl_one(bn_wl *w, int k, int r, unsigned round)
{
    bn_series *s = &w->s[k][r];
    int fs = bn_wl_kind(r) == BN_WK_FS;
    bn_wl_size z = {0};
    double secs = 0, rate = 0;
    if (s->skip)
        return;
    w->why[0] = '\0';
    int rc = bn_wl_up(w, r);
    if (rc == 0)
        rc = bn_wl_kinds[k].run ? bn_wl_kinds[k].run(w, &secs, &rate)
                                : bn_wl_tree(w, k - BN_WL_TREE0, &secs, &rate);
    if (rc == 0 && fs && k < BN_WL_TREE0)
        rc = bn_wl_size_mnt(w, &z, bn_wl_block(w, r));
    rc |= bn_wl_unmount(w);
    if (rc == 0 && fs && k < BN_WL_TREE0)
        bn_wl_size_store(w, &z);
    rc |= bn_wl_down(w);
    if (rc != 0) {
        bn_wl_failed(w, k, r, round);
        return;
    }
    bn_wl_record(s, secs, rate);
    if (fs)
        w->size[k][r] = z;
}

/* ---- holes: a 100 GiB truncate, and one past any sane limit ---- */

/* ftruncate(PATH, len) of a new file in a child, so a daemon that takes forever cannot hold
 * the run: the child is killed after BN_WL_TRUNC_WAIT_S (*timed_out). *err: its errno;
 * secs[0] the ftruncate, secs[1] the close after it. */
static void bn_wl_child_trunc(const char *path, long long len, double secs[2], int *err,
                              int *timed_out)
{
    int p[2];
    double res[3] = {0, EIO, 0};
    *timed_out = 0, *err = EIO, secs[0] = secs[1] = 0;
    if (pipe(p) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        /* the parent alone cleans up on a signal */
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        double t0 = bn_clock(CLOCK_MONOTONIC);
        int rc = fd < 0 ? -1 : ftruncate(fd, (off_t)len);
        res[0] = bn_clock(CLOCK_MONOTONIC) - t0, res[1] = rc == 0 ? 0 : errno;
        t0 = bn_clock(CLOCK_MONOTONIC);
        if (fd >= 0)
            close(fd);
        res[2] = bn_clock(CLOCK_MONOTONIC) - t0;
        _exit(write(p[1], res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
    }
    close(p[1]);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int ready = pid > 0 && poll(&pf, 1, (int)(BN_WL_TRUNC_WAIT_S * 1000)) == 1;
    if (ready && read(p[0], res, sizeof(res)) == (ssize_t)sizeof(res))
        secs[0] = res[0], *err = (int)res[1], secs[1] = res[2];
    else if (pid > 0)
        *timed_out = 1, secs[0] = BN_WL_TRUNC_WAIT_S, kill(pid, SIGKILL);
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    close(p[0]);
}

static int bn_wl_hole_run(bn_wl *w, bn_wl_hole *h)
{
    char path[BN_PATH], huge[BN_PATH];
    struct stat st;
    double secs[2], ignored[2];
    bn_path(path, w->dir, "hole");
    bn_path(huge, w->dir, "huge");
    bn_wl_child_trunc(path, (long long)w->c.hole_gb << 30, secs, &h->err, &h->timed_out);
    h->secs = secs[0], h->close_secs = secs[1];
    if (stat(path, &st) != 0)
        return bn_wl_why(w, "stat %s: %s", path, strerror(errno));
    h->apparent = (long long)st.st_size, h->allocated = (long long)st.st_blocks * 512;
    bn_wl_child_trunc(huge, BN_WL_HUGE, ignored, &h->huge_err, &h->huge_timed_out);
    return 0;
}

static void bn_wl_hole_one(bn_wl *w, int r)
{
    bn_wl_hole *h = &w->hole[r];
    bn_wl_size z = {0};
    w->why[0] = '\0';
    int rc = bn_wl_up(w, r);
    rc = rc ? rc : bn_wl_hole_run(w, h);
    rc |= bn_wl_unmount(w);
    if (rc == 0 && bn_wl_kind(r) == BN_WK_FS) {
        bn_wl_size_store(w, &z);
        h->store_alloc = z.allocated;
    }
    rc |= bn_wl_down(w);
    h->ok = rc == 0;
    if (rc != 0)
        fprintf(stderr, BN_NAME ": holes on %s FAILED: %s\n", w->rname[r], w->why);
    else
        fprintf(stderr, "  %-52s %-16s ftruncate to %u GiB: %.3f s (%s), close %.3f s, "
                "allocated %lld\n", "holes", w->rname[r], w->c.hole_gb, h->secs,
                h->timed_out ? "gave up" : h->err ? strerrorname_np(h->err) : "ok",
                h->close_secs, h->allocated);
}

/* ---- the daemon's write_bytes for a 10-byte overwrite in the middle of a large file ---- */

/* write_bytes once it has not moved for BN_WL_SETTLE_S: the daemon's own work is done. */
static long long bn_wl_settled(pid_t pid)
{
    long long last = bn_io_write_bytes(pid);
    double t0 = bn_clock(CLOCK_MONOTONIC), still = t0;
    while (bn_clock(CLOCK_MONOTONIC) - t0 < BN_WL_SETTLE_MAX_S) {
        usleep(50000);
        long long now = bn_io_write_bytes(pid);
        if (now != last)
            last = now, still = bn_clock(CLOCK_MONOTONIC);
        else if (bn_clock(CLOCK_MONOTONIC) - still >= BN_WL_SETTLE_S)
            break;
    }
    return last;
}

/* lz4 -1 of the store block that holds byte `at` of the edited data. */
static long long bn_wl_cblock(const uint8_t *data, size_t len, size_t at, uint32_t block)
{
    size_t start = at / block * block, n = len - start < block ? len - start : block;
    int cap = LZ4_compressBound((int)n);
    char *out = bn_alloc((size_t)cap);
    int c = LZ4_compress_default((const char *)data + start, out, (int)n, cap);
    free(out);
    return c > 0 ? c : -1;
}

/* nftw passes no context to its callback; this one needs none. */
static int bn_wl_drop_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    int fd = flag == FTW_F && S_ISREG(st->st_mode) ? open(path, O_RDONLY) : -1;
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    return 0;
}

/* Writes back the run's filesystem and drops the backing files' pages. write_bytes counts a
 * page-cache folio when it is dirtied, whole: a folio still dirty from the copy would hide
 * its rewrite, and a large cached folio (ext4 makes them) would count all of itself for a
 * few bytes. Uncached, a write gets folios of about its own size. */
static void bn_wl_writeback(const bn_wl *w)
{
    int fd = open(w->base, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        syncfs(fd);
        close(fd);
    }
    nftw(w->m.backing, bn_wl_drop_one, 64, FTW_PHYS);
}

static int bn_wl_overwrite(bn_wl *w, bn_wl_wb *x, const char *path, size_t at)
{
    bn_wl_settled(w->m.pid);
    bn_wl_writeback(w);
    long long base = bn_io_write_bytes(w->m.pid);
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return bn_wl_why(w, "open %s: %s", path, strerror(errno));
    if (pwrite(fd, "OVERWRITE!", BN_WL_EDIT, (off_t)at) != (ssize_t)BN_WL_EDIT ||
        fsync(fd) != 0) {
        close(fd);
        return bn_wl_why(w, "overwrite and fsync of %s: %s", path, strerror(errno));
    }
    x->at_fsync = bn_io_write_bytes(w->m.pid) - base;
    if (close(fd) != 0)
        return bn_wl_why(w, "close %s: %s", path, strerror(errno));
    x->at_close = bn_wl_settled(w->m.pid) - base;
    return base < 0 ? bn_wl_why(w, "no /proc/%ld/io", (long)w->m.pid) : 0;
}

static int bn_wl_wb_run(bn_wl *w, int r, bn_wl_wb *x)
{
    char path[BN_PATH];
    size_t len = (size_t)w->c.big_len, at = len / 2;
    bn_path(path, w->dir, "big");
    char *cp[] = {"cp", (char *)w->c.big, path, NULL};
    if (len <= BN_WL_EDIT || bn_run(cp, NULL, NULL) != 0)
        return bn_wl_why(w, "cannot copy %s into %s", w->c.big, path);
    int rc = bn_wl_overwrite(w, x, path, at);
    uint8_t *model = rc ? NULL : bn_wl_slurp(w->c.big, &len);
    if (!model)
        return rc ? rc : bn_wl_why(w, "cannot read %s", w->c.big);
    memcpy(model + at, "OVERWRITE!", BN_WL_EDIT);
    if (!bn_wl_same_buf(path, model, len))
        rc = bn_wl_why(w, "VERIFY FAILED: %s differs after the overwrite", path);
    x->cblock = bn_wl_kind(r) == BN_WK_FS ? bn_wl_cblock(model, len, at, bn_wl_block(w, r))
                                          : -1;
    free(model);
    return rc;
}

static void bn_wl_wb_one(bn_wl *w, int r)
{
    bn_wl_wb *x = &w->wb[r];
    w->why[0] = '\0';
    int rc = bn_wl_up(w, r);
    rc = rc ? rc : bn_wl_wb_run(w, r, x);
    rc |= bn_wl_down(w);
    x->ok = rc == 0;
    if (rc != 0)
        fprintf(stderr, BN_NAME ": write_bytes on %s FAILED: %s\n", w->rname[r], w->why);
    else
        fprintf(stderr, "  %-52s %-16s 10-byte overwrite: %lld bytes at fsync, %lld after "
                "close\n", "daemon write_bytes", w->rname[r], x->at_fsync, x->at_close);
}

/* ---- preparation ---- */

static void bn_wl_names(bn_wl *w)
{
    snprintf(w->rname[BN_WR_FS], sizeof(w->rname[0]), "fpgalz4fs %s",
             sb_block_size_name(w->c.block));
    snprintf(w->rname[BN_WR_FS64], sizeof(w->rname[0]), "fpgalz4fs 64K");
    snprintf(w->rname[BN_WR_PT], sizeof(w->rname[0]), "passthrough_ll");
    snprintf(w->rname[BN_WR_PTK], sizeof(w->rname[0]), "passthrough_ll wb,xattr,perm");
    snprintf(w->rname[BN_WR_PLAIN], sizeof(w->rname[0]), "%s",
             w->fresh ? "plain ext4" : "plain directory");
    snprintf(w->wname[BN_WL_SQL_DEL], 128, "SQLite DELETE: %u one-row transactions", w->c.ops);
    snprintf(w->wname[BN_WL_SQL_WAL], 128, "SQLite WAL: %u one-row transactions", w->c.ops);
    snprintf(w->wname[BN_WL_APPEND], 128, "%u `>>` appends of %u bytes", w->c.ops,
             BN_WL_LINE);
    snprintf(w->wname[BN_WL_APPEND_LOG], 128, "%u `>>` appends of %u bytes to a %u KiB log",
             w->c.ops, BN_WL_LINE, BN_WL_LOG_BYTES / 1024);
    snprintf(w->wname[BN_WL_FSYNC], 128, "%u appends of %u bytes + fsync", w->c.ops,
             BN_WL_REC);
    snprintf(w->wname[BN_WL_FSYNC_LOG], 128, "%u appends of %u bytes + fsync to a %u KiB log",
             w->c.ops, BN_WL_REC, BN_WL_LOG_BYTES / 1024);
    snprintf(w->wname[BN_WL_FIO], 128, "fio 4K randwrite, %u MiB file", w->c.file_mib);
    snprintf(w->wname[BN_WL_FIO_SYNC], 128, "fio 4K randwrite --fsync=32, %u MiB file",
             w->c.file_mib);
    snprintf(w->wname[BN_WL_EDITS], 128, "%u 10-byte edits of a %u MiB file, close after "
             "each", w->c.edits, w->c.file_mib);
    static const char *tree_what[] = {"cp -r", "tar -x", "find -type f, xargs stat (cold)",
                                      "du -s (cold)", "ls -lR (cold)", "git status (cold)",
                                      "rm -r"};
    for (int k = BN_WL_TREE0; k < BN_WL_N; k++)
        snprintf(w->wname[k], 128, "%s, a tree of %u small files", tree_what[k - BN_WL_TREE0],
                 w->c.tree_files);
}

/* Whether --wl-rows names the row tagged tag (every row without --wl-rows). */
static int bn_wl_wanted(const bn_wl *w, const char *tag)
{
    size_t n = strlen(tag);
    for (const char *p = w->c.rows; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, tag, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return !w->c.rows;
}

static void bn_wl_series_init(bn_wl *w)
{
    for (int k = 0; k < BN_WL_N; k++)
        for (int r = 0; r < BN_WR_N; r++) {
            bn_series *s = &w->s[k][r];
            *s = (bn_series){.row = w->wname[k], .rival = w->rname[r],
                             .unit = bn_wl_kinds[k].unit, .skip = w->rskip[r]};
            if (!s->skip && !bn_wl_wanted(w, bn_wl_kinds[k].tag))
                s->skip = "not in --wl-rows";
            if (!s->skip && r == BN_WR_PTK && (k == BN_WL_APPEND || k == BN_WL_APPEND_LOG ||
                                           k == BN_WL_FSYNC || k == BN_WL_FSYNC_LOG))
                s->skip = "not run: with -o writeback, libfuse 3.14's passthrough_ll writes the "
                          "pages of an O_APPEND file at its end again (5 appends of 100 bytes, "
                          "each with fsync, leave 1,500 bytes), which the check after the run "
                          "refuses";
            if (!s->skip && bn_wl_kinds[k].tool && !bn_have(bn_wl_kinds[k].tool)) {
                snprintf(w->skipbuf[k][r], sizeof(w->skipbuf[k][r]), "%s is not installed",
                         bn_wl_kinds[k].tool);
                s->skip = w->skipbuf[k][r];
            }
        }
}

/* NULL when each run can have its own ext4 (probed once); else why not. */
static const char *bn_wl_fresh_probe(bn_wl *w)
{
    bn_path(w->loop.img, w->c.work, "wl.img");
    bn_path(w->loop.dir, w->c.work, "wl-fresh");
    if (geteuid() != 0)
        return "not root";
    if (!bn_have("mkfs.ext4"))
        return "no mkfs.ext4 on PATH";
    if (bn_loop_up(&w->loop, BN_WL_IMG_BYTES, BN_WL_INODES) != 0)
        return "mkfs.ext4 or the loop mount failed";
    return bn_loop_down(&w->loop) == 0 ? NULL : "the loop mount did not unmount cleanly";
}

static int bn_wl_prepare(bn_wl *w)
{
    bn_path(w->m.mnt, w->c.work, "wl-mnt");
    bn_path(w->sql[0], w->c.work, "wl-delete.sql");
    bn_path(w->sql[1], w->c.work, "wl-wal.sql");
    bn_path(w->text, w->c.work, "wl-text");
    if (bn_mkdirs(w->m.mnt) != 0)
        return bn_fail(strerror(errno), w->m.mnt);
    const char *why = bn_wl_fresh_probe(w);
    w->fresh = !why;
    if (why)
        snprintf(w->setup, sizeof(w->setup), "the work directory's filesystem, emptied "
                 "between runs (no fresh ext4 per run: %s)", why);
    else
        snprintf(w->setup, sizeof(w->setup), "a fresh ext4 per run (workload, rival and "
                 "round; the holes and write_bytes rows too): a sparse %llu GiB image in the work directory, `mkfs.ext4 -N %lu`, "
                 "`mount -o loop,noinit_itable`", BN_WL_IMG_BYTES >> 30, BN_WL_INODES);
    fprintf(stderr, BN_NAME ": workloads on %s\n", w->setup);
    w->rskip[BN_WR_PT] = bn_pt_build(w->c.work, w->c.pt_src, w->pt, w->pt_src);
    w->rskip[BN_WR_PTK] = w->rskip[BN_WR_PT];
    if (w->c.block == 64u * 1024u)
        w->rskip[BN_WR_FS64] = "the main store already has 64K blocks";
    bn_wl_names(w);
    bn_wl_series_init(w);
    if (bn_corpus_write_generated(w->text, w->c.file_mib) != 0)
        return bn_fail("cannot write the edits' text", w->text);
    bn_path(w->tree, w->c.work, "wl-tree");
    bn_path(w->tree_tar, w->c.work, "wl-tree.tar");
    if (bn_tree_make(w->tree, w->tree_tar, w->c.tree_files) != 0)
        return bn_fail("cannot write the metadata rows' tree", w->tree);
    return bn_wl_sql_script(w, 0) | bn_wl_sql_script(w, 1);
}

/* ---- the targets of the issue ---- */

static double bn_wl_med(const bn_series *s)
{
    return s->skip || !s->n ? -1 : s->median;
}

static bn_target *bn_wl_new_target(bn_wl *w, const char *unit, int at_most)
{
    bn_target *t = &w->t[w->nt];
    *t = (bn_target){.name = w->tname[w->nt], .unit = unit, .at_most = at_most,
                     .tag = w->ttag[w->nt]};
    w->nt++;
    return t;
}

/* why: a literal or a series' reason, which live as long as w. */
static void bn_wl_skip(bn_wl *w, bn_target *t, const char *why)
{
    t->skip = why;
}

/* allocated <= 1.15 x lz4 -1 + 64 KiB and apparent <= 1.01 x logical + 2 blocks. */
static void bn_wl_size_targets(bn_wl *w, int k, int r)
{
    const bn_wl_size *z = &w->size[k][r];
    const bn_series *s = &w->s[k][r];
    const char *bs = r == BN_WR_FS ? sb_block_size_name(w->c.block) : "64K";
    bn_target *a = bn_wl_new_target(w, "KiB", 1), *p = bn_wl_new_target(w, "KiB", 1);
    snprintf(w->tname[a - w->t], 192, "workload %s, fpgalz4fs %s: allocated <= 1.15 x lz4 -1 "
             "+ 64 KiB", bn_wl_kinds[k].tag, bs);
    snprintf(w->ttag[a - w->t], 48, "%s %s alloc", bs, bn_wl_kinds[k].tag);
    snprintf(w->tname[p - w->t], 192, "workload %s, fpgalz4fs %s: apparent <= 1.01 x logical "
             "+ 2 blocks", bn_wl_kinds[k].tag, bs);
    snprintf(w->ttag[p - w->t], 48, "%s %s apparent", bs, bn_wl_kinds[k].tag);
    a->measured = z->allocated / 1024.0, a->required = (1.15 * z->lz4 + 65536) / 1024.0;
    p->measured = z->apparent / 1024.0;
    p->required = (1.01 * z->logical + 2.0 * bn_wl_block(w, r)) / 1024.0;
    if (!z->ok) {
        bn_wl_skip(w, a, s->skip ? s->skip : "not measured");
        bn_wl_skip(w, p, a->skip);
    }
}

static void bn_wl_speed_target(bn_wl *w, int k, int r)
{
    const char *bs = r == BN_WR_FS ? sb_block_size_name(w->c.block) : "64K";
    bn_target *t = bn_wl_new_target(w, "x", 0);
    double fs = bn_wl_med(&w->s[k][r]), pt = bn_wl_med(&w->s[k][BN_WR_PT]);
    snprintf(w->tname[t - w->t], 192, "workload %s, fpgalz4fs %s / passthrough_ll (%s)",
             bn_wl_kinds[k].tag, bs, bn_wl_kinds[k].unit);
    snprintf(w->ttag[t - w->t], 48, "%s %s speed", bs, bn_wl_kinds[k].tag);
    t->required = bn_wl_kinds[k].speed_goal;
    t->measured = fs > 0 && pt > 0 ? fs / pt : 0;
    if (fs <= 0 || pt <= 0)
        bn_wl_skip(w, t, fs <= 0 ? (w->s[k][r].skip ? w->s[k][r].skip : "no rounds")
                                 : (w->s[k][BN_WR_PT].skip ? w->s[k][BN_WR_PT].skip
                                                           : "no rounds"));
}

/* write_bytes of the 10-byte overwrite + fsync (through close) <= 2 x its block + 64 KiB. */
static void bn_wl_wb_target(bn_wl *w, int r)
{
    const char *bs = r == BN_WR_FS ? sb_block_size_name(w->c.block) : "64K";
    const bn_wl_wb *x = &w->wb[r];
    bn_target *t = bn_wl_new_target(w, "KiB", 1);
    snprintf(w->tname[t - w->t], 192, "fpgalz4fs %s: daemon write_bytes of a 10-byte "
             "overwrite + fsync <= 2 x compressed block + 64 KiB", bs);
    snprintf(w->ttag[t - w->t], 48, "%s write_bytes", bs);
    t->measured = x->at_close / 1024.0, t->required = (2.0 * x->cblock + 65536) / 1024.0;
    if (w->wb_skip)
        bn_wl_skip(w, t, w->wb_skip);
    else if (!x->ok || x->cblock < 0)
        bn_wl_skip(w, t, "the write_bytes row failed");
}

static void bn_wl_finish(bn_wl *w)
{
    for (int k = 0; k < BN_WL_N; k++)
        for (int r = 0; r < BN_WR_N; r++) {
            bn_series *s = &w->s[k][r];
            double v[BN_MAX_ROUNDS];
            memcpy(v, s->rate, sizeof(v));
            s->median = bn_median(v, s->n);
        }
    for (int r = BN_WR_FS; r <= BN_WR_FS64; r++) {
        if (w->rskip[r])
            continue;
        for (int k = 0; k < BN_WL_TREE0; k++)
            bn_wl_size_targets(w, k, r);
        for (int k = 0; k < BN_WL_N; k++)
            if (bn_wl_kinds[k].speed_goal > 0)
                bn_wl_speed_target(w, k, r);
        bn_wl_wb_target(w, r);
    }
}

/* ---- the run ---- */

int bn_wl_run(const bn_wl_cfg *c, bn_wl **out)
{
    bn_wl *w = bn_alloc(sizeof(*w));
    memset(w, 0, sizeof(*w));
    w->c = *c;
    *out = w;
    fprintf(stderr, BN_NAME ": workloads part\n");
    if (bn_wl_prepare(w) != 0)
        return -1;
    for (unsigned round = 0; round < c->rounds; round++)
        for (int k = 0; k < BN_WL_N; k++)
            for (int r = 0; r < BN_WR_N; r++)
                bn_wl_one(w, k, r, round);
    w->hole_skip = bn_wl_wanted(w, "holes") ? NULL : "not in --wl-rows";
    w->wb_skip = bn_wl_wanted(w, "write-bytes") ? NULL : "not in --wl-rows";
    for (int r = 0; r < BN_WR_N; r++)
        if (bn_wl_side_row(w, r, w->hole_skip))
            bn_wl_hole_one(w, r);
    for (int r = 0; r < BN_WR_PLAIN; r++)
        if (bn_wl_side_row(w, r, w->wb_skip))
            bn_wl_wb_one(w, r);
    bn_wl_finish(w);
    return 0;
}

int bn_wl_rows_valid(const char *rows)
{
    for (const char *p = rows; p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int ok = (n == 5 && strncmp(p, "holes", n) == 0) ||
                 (n == 11 && strncmp(p, "write-bytes", n) == 0);
        for (int k = 0; k < BN_WL_N && !ok; k++)
            ok = strlen(bn_wl_kinds[k].tag) == n && strncmp(p, bn_wl_kinds[k].tag, n) == 0;
        if (!ok)
            return 0;
        p = e ? e + 1 : NULL;
    }
    return 1;
}

int bn_wl_failures(const bn_wl *w)
{
    int n = w->failures;
    for (int r = 0; r < BN_WR_N; r++)
        n += bn_wl_side_row(w, r, w->hole_skip) && !w->hole[r].ok;
    for (int r = 0; r < BN_WR_PLAIN; r++)
        n += bn_wl_side_row(w, r, w->wb_skip) && !w->wb[r].ok;
    return n;
}

size_t bn_wl_targets(const bn_wl *w, bn_target *t, size_t cap)
{
    size_t n = w->nt < cap ? w->nt : cap;
    memcpy(t, w->t, n * sizeof(*t));
    return n;
}

/* ---- fs.md and fs.csv ---- */

static void bn_wl_cell(FILE *f, const bn_series *s)
{
    if (s->skip)
        fprintf(f, " %s |", strncmp(s->skip, "FAILED", 6) ? "skipped" : "FAILED");
    else if (!s->n)
        fprintf(f, " - |");
    else
        fprintf(f, " %.1f |", s->median);
}

static void bn_wl_ratio_cell(FILE *f, const bn_wl *w, int k, int r, int rival)
{
    double a = bn_wl_med(&w->s[k][r]), z = bn_wl_med(&w->s[k][rival]);
    if (a > 0 && z > 0)
        fprintf(f, " %.2fx |", a / z);
    else
        fprintf(f, " - |");
}

static void bn_wl_speed_table(FILE *f, const bn_wl *w)
{
    fprintf(f, "| workload | unit |");
    for (int r = 0; r < BN_WR_N; r++)
        fprintf(f, " %s |", w->rname[r]);
    fprintf(f, " %s / passthrough_ll | 64K / passthrough_ll | %s / %s | 64K / %s |\n"
               "| --- | --- |", w->rname[0], w->rname[0], w->rname[BN_WR_PTK],
            w->rname[BN_WR_PTK]);
    for (int c = 0; c < BN_WR_N + 4; c++)
        fprintf(f, " ---: |");
    fprintf(f, "\n");
    for (int k = 0; k < BN_WL_N; k++) {
        fprintf(f, "| %s | %s |", w->wname[k], bn_wl_kinds[k].unit);
        for (int r = 0; r < BN_WR_N; r++)
            bn_wl_cell(f, &w->s[k][r]);
        bn_wl_ratio_cell(f, w, k, BN_WR_FS, BN_WR_PT);
        bn_wl_ratio_cell(f, w, k, BN_WR_FS64, BN_WR_PT);
        bn_wl_ratio_cell(f, w, k, BN_WR_FS, BN_WR_PTK);
        bn_wl_ratio_cell(f, w, k, BN_WR_FS64, BN_WR_PTK);
        fprintf(f, "\n");
    }
    for (int r = 0; r < BN_WR_N; r++)
        if (w->rskip[r])
            fprintf(f, "\n- %s, not run: %s", w->rname[r], w->rskip[r]);
    for (int k = 0; k < BN_WL_N; k++)
        for (int r = 0; r < BN_WR_N; r++)
            if (w->s[k][r].skip && w->s[k][r].skip != w->rskip[r])
                fprintf(f, "\n- %s on %s: %s", bn_wl_kinds[k].tag, w->rname[r],
                        w->s[k][r].skip);
    fprintf(f, "\n");
}

static void bn_wl_size_row(FILE *f, const bn_wl *w, int k, int r)
{
    const bn_wl_size *z = &w->size[k][r];
    if (!z->ok) {
        fprintf(f, "| %s | %s | - | - | - | - | - | - |\n", bn_wl_kinds[k].tag, w->rname[r]);
        return;
    }
    fprintf(f, "| %s | %s | %lld | %lld | %lld | %lld | %.3f | %.3f |\n", bn_wl_kinds[k].tag,
            w->rname[r], z->logical, z->apparent, z->allocated, z->lz4,
            z->lz4 > 0 ? (double)z->allocated / (double)z->lz4 : 0,
            z->logical > 0 ? (double)z->apparent / (double)z->logical : 0);
}

static void bn_wl_size_table(FILE *f, const bn_wl *w)
{
    fprintf(f, "| workload | store | logical | apparent | allocated | lz4 -1 | allocated / "
               "lz4 -1 | apparent / logical |\n"
               "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int r = BN_WR_FS; r <= BN_WR_FS64; r++)
        if (!w->rskip[r])
            for (int k = 0; k < BN_WL_TREE0; k++)
                bn_wl_size_row(f, w, k, r);
}

static const char *bn_wl_errname(int err, int timed_out)
{
    if (timed_out)
        return "gave up (still running)";
    return err ? strerrorname_np(err) : "succeeded";
}

static void bn_wl_hole_table(FILE *f, const bn_wl *w)
{
    fprintf(f, "| rival | ftruncate to %u GiB | the close after it | apparent | allocated "
               "after close | store growth, allocated | truncate to %lld |\n| --- | ---: | "
               "---: | ---: | ---: | ---: | --- |\n", w->c.hole_gb, BN_WL_HUGE);
    for (int r = 0; r < BN_WR_N; r++) {
        const bn_wl_hole *h = &w->hole[r];
        if (r == BN_WR_PTK)
            continue;
        if (!bn_wl_side_row(w, r, w->hole_skip) || !h->ok) {
            fprintf(f, "| %s | %s | - | - | - | - | - |\n", w->rname[r],
                    w->rskip[r] || w->hole_skip ? "skipped" : "FAILED");
            continue;
        }
        char grow[32] = "-";
        if (bn_wl_kind(r) == BN_WK_FS)
            snprintf(grow, sizeof(grow), "%lld", h->store_alloc);
        fprintf(f, "| %s | %.4f s%s%s | %.3f s | %lld | %lld | %s | %s (%s) |\n", w->rname[r],
                h->secs, h->err || h->timed_out ? ", " : "", h->err || h->timed_out
                    ? bn_wl_errname(h->err, h->timed_out) : "", h->close_secs, h->apparent,
                h->allocated,
                grow, bn_wl_errname(h->huge_err, h->huge_timed_out),
                !h->huge_timed_out && (!h->huge_err || h->huge_err == EFBIG ||
                                       h->huge_err == EINVAL) ? "as required" : "NOT as required");
    }
}

static void bn_wl_wb_table(FILE *f, const bn_wl *w)
{
    fprintf(f, "| rival | write_bytes to fsync | write_bytes through close | lz4 -1 of the "
               "block | goal (2 x block + 64 KiB) |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int r = 0; r < BN_WR_PLAIN; r++) {
        const bn_wl_wb *x = &w->wb[r];
        if (r == BN_WR_PTK)
            continue;
        if (!bn_wl_side_row(w, r, w->wb_skip) || !x->ok) {
            fprintf(f, "| %s | %s | - | - | - |\n", w->rname[r],
                    w->rskip[r] || w->wb_skip ? "skipped" : "FAILED");
            continue;
        }
        if (x->cblock >= 0)
            fprintf(f, "| %s | %lld | %lld | %lld | %lld |\n", w->rname[r], x->at_fsync,
                    x->at_close, x->cblock, 2 * x->cblock + 65536);
        else
            fprintf(f, "| %s | %lld | %lld | - | - |\n", w->rname[r], x->at_fsync,
                    x->at_close);
    }
}

static void bn_wl_setup_text(FILE *f, const bn_wl *w)
{
    fprintf(f, "- rivals: fpgalz4fs (`-o engine=sw%s%s`, a store of %s blocks and one of 64K "
               "blocks, made by mkfpgalz4fs); libfuse's passthrough_ll example (%s%s, built "
               "with `cc -O2 $(pkg-config --cflags --libs fuse3)`, mounted `-f -o source=DIR`: "
               "its defaults, cache=auto, no writeback cache, multi-threaded); the same "
               "passthrough_ll mounted `-o " BN_WL_PTK_OPTS "` (passthrough_ll wb,xattr,perm): "
               "the kernel settings fpgalz4fs mounts with, so that the kernel sends it the "
               "requests it sends fpgalz4fs (writeback cache: SETATTR of the times, GETXATTR "
               "security.capability before each write; the kernel's permission checks: GETATTR "
               "of a directory a change made stale; but no POSIX ACLs, which passthrough_ll "
               "cannot enforce); %s\n",
            w->c.fs_opts ? "," : "", w->c.fs_opts ? w->c.fs_opts : "",
            sb_block_size_name(w->c.block), w->rskip[BN_WR_PT] ? "not run: " : "",
            w->rskip[BN_WR_PT] ? w->rskip[BN_WR_PT] : w->pt_src,
            w->fresh ? "plain ext4" : "a plain directory");
    fprintf(f, "- runs on %s, each with a new mount; %u round(s), medians\n", w->setup,
            w->c.rounds);
    fprintf(f, "- SQLite: the sqlite3 shell, one process per run, `INSERT` of %u bytes of text "
               "per transaction (autocommit), default synchronous=FULL; appends: "
               "open(O_APPEND)/write/close per line; fsync appends: one open file (to a new file "
               "and to a log that holds %u KiB); fio: psync, "
               "%u s time based, buffer_compress_percentage=60, refill_buffers, invalidate=0, "
               "IOPS from its JSON; edits: open/pwrite/close at offsets of a fixed seed\n",
            BN_WL_REC, BN_WL_LOG_BYTES / 1024, w->c.fio_secs);
    fprintf(f, "- every output read back and checked after its timed run (rows, records, the "
               "edited file); a failed run is marked FAILED and the driver exits 1\n");
}

void bn_wl_report(FILE *f, const bn_wl *w)
{
    fprintf(f, "\n### Workloads\n\n");
    bn_wl_setup_text(f, w);
    fprintf(f, "\n");
    bn_wl_speed_table(f, w);
    fprintf(f, "\n### Workloads: what fpgalz4fs stored (last round)\n\n"
               "Bytes. Logical: the files' sizes in the mount; lz4 -1: `lz4 -1 -BN -BX "
               "--no-frame-crc` of each final file read through the mount, -BN the store's "
               "block size (%s for %s, -B4 for 64K); apparent and allocated: the growth of the store's regular files "
               "(st_size, st_blocks x 512) from the freshly made store to after the unmount.\n\n",
            bn_lz4_bsize(w->c.block), sb_block_size_name(w->c.block));
    bn_wl_size_table(f, w);
    fprintf(f, "\n### Holes\n\nOne `ftruncate` of a new file, timed alone, then its `close` "
               "(for fpgalz4fs the commit that writes the hole); sizes after close (stat in "
               "the mount); the store's growth after the unmount; the truncate to %lld must "
               "give EFBIG or EINVAL or succeed.\n\n", BN_WL_HUGE);
    bn_wl_hole_table(f, w);
    fprintf(f, "\n### Daemon write_bytes of a 10-byte overwrite\n\n%lld bytes of the large "
               "file copied in and closed, the daemon's write_bytes (/proc/PID/io) left to "
               "settle, the backing filesystem written back (syncfs) and the backing files' page "
               "cache dropped (write_bytes counts a page-cache folio, whole, when it is dirtied: "
               "a folio still dirty would hide its rewrite, a large cached one would count all "
               "of itself), then 10 bytes overwritten in the middle, fsync, close; deltas at fsync "
               "and once write_bytes stood still for %.1f s after close (the goal uses the "
               "latter).\n\n", (long long)w->c.big_len, BN_WL_SETTLE_S);
    bn_wl_wb_table(f, w);
}

void bn_wl_csv(FILE *f, const bn_wl *w)
{
    for (int k = 0; k < BN_WL_N; k++)
        for (int r = 0; r < BN_WR_N; r++)
            for (unsigned i = 0; i < w->s[k][r].n; i++)
                fprintf(f, "\"%s\",\"%s\",%u,%.6f,%.3f,%s\n", w->s[k][r].row,
                        w->s[k][r].rival, i + 1, w->s[k][r].secs[i], w->s[k][r].rate[i],
                        w->s[k][r].unit);
}
