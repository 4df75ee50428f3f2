/* Opening an own file: loading its seek table and finishing an interrupted commit, or
 * rebuilding the table of a torn file from its visible frames; reading the marker. */
#include "ff_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "fmt.h"
#include "fmt2.h"

/* ---- opening, repair ---- */

static void ff_take_table(ff_file *f, fmt_trailer *t)
{
    f->size = t->size;
    ff_set_blocks(f, t->n_entries);
    f->n_stored = t->n_entries;
    for (uint64_t i = 0; i < t->n_entries; i++)
        f->blk[i] = (ff_blk){.off = t->entries[i].off, .word = t->entries[i].word, .state = FF_CLEAN};
}

/* Header flips are not synced: a machine crash can keep bytes appended after a durable seek
 * table (a later streaming commit) and lose the flips that table asked for. Finishing the
 * last intact table's flips before walking the frames brings its state back. */
static void ff_finish_last_table(ff_file *f, uint64_t file_len)
{
    fmt_scan_result sr;
    fmt_trailer t;
    if (f->env->opt.read_only || fmt_scan(f->fd, file_len, f->bs, 0, &sr) != FMT_OK)
        return;
    if (sr.last_table_end && fmt_trailer_read(f->fd, sr.last_table_end, f->bs, &t) == FMT_OK) {
        int n = fmt_apply_intents(f->fd, &t, 1);
        if (n > 0)
            lg_printf(f->env->log, LG_WARN, "%s: finished %d header flips of the last intact "
                      "seek table", ff_name(f), n);
        fmt_trailer_free(&t);
    }
    fmt_trailer_free(&sr.table);
}

/* Rebuilds the seek table of a torn file from its visible frames (verifying every block),
 * cuts the torn tail, and writes the table back, keeping the file's mtime. */
static int ff_repair(ff_file *f, uint64_t file_len)
{
    fmt_scan_result sr;
    ff_finish_last_table(f, file_len);
    fmt_error err = fmt_scan(f->fd, file_len, f->bs, 1, &sr);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = ff_reserve(f, sr.table.n_entries);
    if (rc == 0) {
        ff_take_table(f, &sr.table);
        f->phys_end = sr.valid_end;
        if (f->env->opt.read_only) {
            lg_printf(f->env->log, LG_WARN, "%s: torn (seek table missing or damaged); not "
                      "repaired on a read-only mount", ff_name(f));
        } else {
            ff_commit_plan p = {.s = f->n_stored, .end = f->n_stored, .size = f->size,
                                .pos = sr.valid_end};
            p.t.entries = calloc(f->n_stored ? f->n_stored : 1, sizeof(fmt_entry));
            rc = p.t.entries ? ff_write_trailer(f, &p) : -ENOMEM;
            if (rc == 0) {
                f->table_start = sr.valid_end, f->table_end = f->phys_end = p.pos;
                f->env->n.repairs++;
                lg_printf(f->env->log, LG_WARN, "%s: repaired a torn file: seek table rebuilt "
                          "from %llu blocks, %llu bytes cut after offset %llu", ff_name(f),
                          (unsigned long long)f->n_stored,
                          (unsigned long long)(file_len - sr.valid_end),
                          (unsigned long long)sr.valid_end);
            }
            fmt_trailer_free(&p.t);
            ff_restore_mtime(f);
        }
    }
    fmt_trailer_free(&sr.table);
    return rc;
}

int ff_load_own(ff_file *f, uint64_t file_len)
{
    if (f->version >= FMT_VERSION_2)
        return ff2_load(f, file_len);
    fmt_trailer t;
    fmt_error err = fmt_trailer_read(f->fd, file_len, f->bs, &t);
    if (err == FMT_ERR_NO_TRAILER)
        return ff_repair(f, file_len);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = ff_reserve(f, t.n_entries);
    if (rc == 0) {
        ff_take_table(f, &t);
        f->phys_end = f->table_end = file_len;
        f->table_start = t.start;
        if (!f->env->opt.read_only && (rc = fmt_apply_intents(f->fd, &t, 1)) > 0) {
            lg_printf(f->env->log, LG_WARN, "%s: finished an interrupted commit (%d headers)",
                      ff_name(f), rc);
            ff_restore_mtime(f);
        }
        rc = rc < 0 ? rc : 0;
    }
    fmt_trailer_free(&t);
    return rc;
}

/* Reads the marker: 1 for an own file (f->bs set), 2 for a version 2 file whose marker a
 * power loss took (fmt2_lost_marker; *bs set), 0 for a foreign one, or -errno. name (NULL:
 * looked up from fd) is for the log line of a newer format. */
int ff_identify(int fd, uint64_t file_len, uint32_t store_bs, uint32_t *bs, uint32_t *version,
                const char *name, lg_log *log)
{
    uint8_t head[FMT_MARKER_LEN];
    fmt_marker m;
    if (file_len < FMT_MARKER_LEN)
        return 0;
    int rc = fmt_pread_all(fd, head, sizeof(head), 0);
    if (rc < 0)
        return rc;
    fmt_error err = fmt_marker_decode(head, sizeof(head), &m);
    char path[256];
    if (err == FMT_ERR_NEWER && !name)
        ff_fd_name(fd, path, sizeof(path)), name = path;
    if (err == FMT_ERR_NEWER)
        lg_printf(log, LG_ERR, "%s: file format version %u is newer than this fpgalz4fs "
                  "supports (%u); refusing it", name, m.version, FMT_VERSION);
    if (err == FMT_ERR_FOREIGN && (*bs = fmt2_lost_marker(fd, head, file_len, store_bs,
                                                          version)) != 0)
        return 2;
    if (err != FMT_OK)
        return err == FMT_ERR_FOREIGN ? 0 : -fmt_errno(err);
    *bs = m.block_size, *version = m.version;
    return 1;
}
