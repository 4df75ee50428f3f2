/* Opening, repair, release and the size of closed files, for format version 2 (docs/FORMAT.md
 * 11.4): memory takes the state the shared recovery (fmt2_recover, fsck's too) leaves, and the
 * file's last release puts it at rest (one footer behind the slots, no journal, no pair). */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ff_slots.h"

static void ff2_set_state(ff_file *f, const fmt2_footer *ft, uint64_t eof)
{
    f->v2 = (ff2_state){.tail = ft->tail, .eof = eof, .seq = ft->seq, .fresh = ft->fresh,
                        .disk_fresh = ft->fresh, .promised = ft->fresh, .size = ft->size,
                        .j_off = ft->j_off,
                        .j_len = ft->j_len, .zsum = f->v2.zsum};
}

static void ff2_take(ff_file *f, uint64_t size, uint64_t n)
{
    f->size = size;
    ff_set_blocks(f, n);
    f->n_stored = n;
    for (uint64_t i = 0; i < n; i++)   /* size words are read when a block is */
        f->blk[i] = (ff_blk){.off = ff2_word_off(f, i), .word = 0, .state = FF_CLEAN};
}

/* A read-only mount cannot rewrite slots: the blocks of a pending journal are read from the
 * journal's copies. */
static void ff2_use_journal(ff_file *f, const fmt2_recovery *r)
{
    for (uint32_t k = 0; k < r->jn; k++) {
        const fmt2_jentry *e = &r->je[k];
        if (e->block >= f->n_blocks)
            continue;                  /* cut by fmt2_check_fresh */
        ff_blk *b = &f->blk[e->block];
        if (!e->frame) {
            b->off |= FMT_ENTRY_ZERO;
            continue;
        }
        b->off = r->jat[k] + FMT_FRAME_HEADER_LEN;
        b->word = fmt_get32(e->frame + FMT_FRAME_HEADER_LEN);
    }
}

static void ff2_log_recovery(ff_file *f, const fmt2_recovery *r, uint64_t file_len)
{
    int ro = f->env->opt.read_only;
    if (r->journal_bad)
        lg_printf(f->env->log, LG_WARN, "%s: the journal of the last commit is damaged; the "
                  "file is read from its slots as they are", ff_name(f));
    if (r->torn && ro)
        lg_printf(f->env->log, LG_WARN, "%s: torn (footer missing or damaged); not repaired "
                  "on a read-only mount", ff_name(f));
    else if (r->torn)
        lg_printf(f->env->log, LG_WARN, "%s: repaired a torn file: %llu blocks (%llu bytes) "
                  "found in their slots, %llu bytes cut after offset %llu", ff_name(f),
                  (unsigned long long)r->ft.n_blocks, (unsigned long long)r->ft.size,
                  (unsigned long long)r->cut, (unsigned long long)r->ft.tail);
    else if (r->replayed || (r->settled && !r->unsynced))
        lg_printf(f->env->log, LG_WARN, "%s: finished an interrupted commit (%u blocks "
                  "rewritten from its journal, %llu bytes of file cut)", ff_name(f), r->replayed,
                  (unsigned long long)(file_len - r->file_len));
    if (r->unsynced_cut)
        lg_printf(f->env->log, LG_WARN, "%s: of the %llu blocks written after its last sync "
                  "before the store was last left, %llu from block %llu on did not reach the "
                  "disk whole (a power loss): the file now ends before them", ff_name(f),
                  (unsigned long long)r->unsynced, (unsigned long long)r->unsynced_cut,
                  (unsigned long long)r->ft.n_blocks);
    if (r->pad_fixed && !ro)
        lg_printf(f->env->log, LG_WARN, "%s: the padding behind block %llu, the last one "
                  "synced, did not reach the disk (a power loss): written back", ff_name(f),
                  (unsigned long long)(r->pad_fixed - 1));
}

/* Whether the file was last changed before this mount began and after the store was last
 * left clean (ff_options): then the session that changed it may have ended in a power
 * loss, and its unsynced blocks are checked (fmt2_check_fresh). */
int ff2_may_have_lost_power(const ff_env *env, uint64_t ctime_ns)
{
    return ctime_ns > env->opt.clean_ns && ctime_ns < env->opt.start_ns;
}

/* Whether a read-only open reads block i from a journal's copy (ff2_use_journal). */
static int ff2_journal_holds(const fmt2_recovery *r, uint64_t i)
{
    for (uint32_t k = 0; k < r->jn; k++)
        if (r->je[k].block == i && r->je[k].frame)
            return 1;
    return 0;
}

/* The recovery fsck runs too (fmt2_recover); memory then takes the state it leaves. */
int ff2_load(ff_file *f, uint64_t file_len)
{
    fmt2_recovery r;
    int ro = f->env->opt.read_only;
    int crashed = ff2_may_have_lost_power(f->env, f->ctime_ns);
    fmt_error err = fmt2_recover(f->fd, file_len, ff2_geo(f), !ro, f->v2.zsum, crashed, &r);
    if (err == FMT_OK && crashed)
        err = fmt2_check_fresh(f->fd, ff2_geo(f), !ro, 1, &r);
    int rc = err == FMT_OK ? ff_reserve(f, r.ft.n_blocks) : -fmt_errno(err);
    uint8_t flags[4];
    if (rc == 0 && f->version >= FMT_VERSION_4 &&
        fmt_pread_all(f->fd, flags, sizeof(flags), FMT_MARKER_FLAGS_OFF) == 0)
        f->rec_flag = (fmt_get32(flags) & FMT_MARKER_RECORDS) != 0,
        f->rec_group = fmt2_rec_group_of(fmt_get32(flags));
    /* the flag is written unsynced: after a crash, records may be there without it */
    if (rc == 0 && f->version >= FMT_VERSION_4)
        f->rec_old = f->rec_flag || ff2_may_have_lost_power(f->env, f->ctime_ns);
    if (rc == 0) {
        ff2_take(f, r.ft.size, r.ft.n_blocks);
        ff2_set_state(f, &r.ft, r.file_len);
        if (r.chain_area && !ff2_journal_holds(&r, r.ft.n_blocks - 1))
            ff_chain_loaded(f, r.chain_area);
        if (r.ft.j_len && !ro)         /* a journal kept at rest: its commit synced every
                                          block, and its slots may be in the cache only */
            f->v2.fresh = f->v2.promised = r.ft.n_blocks, f->v2.j_live = 1;
        if (ro)
            ff2_use_journal(f, &r);
        ff2_log_recovery(f, &r, file_len);
        f->env->n.repairs += r.torn || r.settled || r.unsynced_cut;
    }
    if (r.settled || r.replayed)
        ff_restore_mtime(f);
    fmt2_recovery_free(&r);
    return rc;
}

/* A new file: the marker and a footer of nothing, in one write. */
size_t ff2_new_file(const ff_env *env, uint8_t *out)
{
    fmt2_marker_encode(ff_new_version(env), env->sb.block_size, 0, env->sb.uuid, out);
    fmt2_footer ft = {0, 0, FMT_MARKER_LEN, 0, 0, 0, 0, 0};
    fmt2_footer_encode(&ft, out + FMT_MARKER_LEN);
    return FMT_MARKER_LEN + FMT2_FOOTER_LEN;
}

void ff2_set_new(ff_file *f)
{
    fmt2_footer ft = {0, 0, FMT_MARKER_LEN, 0, 0, 0, 0, 0};
    ff2_set_state(f, &ft, FMT_MARKER_LEN + FMT2_FOOTER_LEN);
}

/* Truncating to nothing: back to the marker, then a footer of nothing. A crash in between
 * leaves the marker alone, which opens as an empty file. The cut is synced before the footer
 * goes over what was slot 0: a power loss may keep that overwrite and lose the cut (ext4
 * journals the length, not the overwrite), and the old footers at the old end would then
 * name a slot 0 that is now a footer (EIO where the old content, or nothing, was due). */
int ff2_empty(ff_file *f)
{
    struct stat st;
    if (f->v2.j_live && fdatasync(f->fd) < 0)
        return -errno;
    if (fstat(f->fd, &st) < 0 || ftruncate(f->fd, FMT_MARKER_LEN) < 0)
        return -errno;
    if ((uint64_t)st.st_size > FMT_MARKER_LEN + FMT2_FOOTER_LEN && fdatasync(f->fd) < 0)
        return -errno;
    fmt2_footer ft = {0, 0, FMT_MARKER_LEN, 0, 0, f->v2.seq + 1, 0, 0};
    int rc = fmt2_footer_write(f->fd, FMT_MARKER_LEN, &ft);
    if (rc == 0)
        ff2_set_state(f, &ft, FMT_MARKER_LEN + FMT2_FOOTER_LEN);
    return rc;
}

int ff2_stat_size(int fd, uint64_t file_len, fmt2_geo g, int check_fresh, uint64_t *size)
{
    fmt2_footer ft;
    fmt_error err = fmt2_footer_find(fd, file_len, g, &ft);
    if (err == FMT_ERR_NO_TRAILER) {
        fmt2_scan_result sr;
        if ((err = fmt2_scan(fd, file_len, g, 0, &sr)) == FMT_OK)
            ft.size = sr.size;
        *size = ft.size;
        return err == FMT_OK ? 1 : -fmt_errno(err);  /* the repair's walk decides */
    }
    if (err != FMT_OK)
        return -fmt_errno(err);
    *size = ft.size;
    if (ft.paired)                     /* a crash left two journals: the open decides */
        return 1;
    if (ft.j_len) {                    /* a damaged journal makes the open walk the slots */
        uint8_t *buf;
        fmt2_jentry *e;
        uint32_t n;
        err = fmt2_journal_read(fd, ft.j_off, ft.j_len, ft.seq, g.bs, ft.n_blocks, &buf, &e, &n);
        free(buf);
        free(e);
        if (err != FMT_OK)
            return err == FMT_ERR_NO_TRAILER ? 1 : -fmt_errno(err);
    }
    /* the open's check decides, and so does its look at a chain a crash may have torn */
    return check_fresh && (ft.fresh < ft.n_blocks || fmt2_chain_suspect(fd, file_len, g, &ft));
}

/* A commit that failed before its footer (a full disk) may have overwritten the old footer
 * with new slots: a footer of the state memory last committed goes back behind its slots, so
 * that the file at rest is that state, whole, as a failed version 1 commit is cut back. Not
 * after the footer: then the journal it names is the commit, redone by the next one. */
void ff2_rollback(ff_file *f)
{
    if (f->v2.j_pending || f->v2.j_live)
        return;
    fmt2_footer ft = {f->v2.size, f->n_stored, f->v2.tail, 0, 0, f->v2.seq + 1, f->v2.fresh, 0};
    if (fmt2_footer_write(f->fd, f->v2.tail, &ft) == 0) {
        f->v2.seq++, f->v2.eof = f->v2.tail + FMT2_FOOTER_LEN, f->v2.footerless = 0;
        f->v2.j_off = f->v2.j_len = 0, f->v2.paired = 0;
    }
}

/* At the last release, two things a file at rest should not keep:
 * - a journal (FORMAT.md 11.1 step 6.7 leaves a small synced one for the next commit to
 *   overwrite): it is a second copy of the blocks it holds, and no next commit may come.
 *   A live one is the only durable copy of its blocks until the slots are synced, so the
 *   slots are synced first; then every block is promised.
 * - a footer written before its commit's sync, which counts fewer blocks as promised than
 *   are (fresh_pre); the next open takes the footer's word, and would rewrite a promised
 *   block without a synced journal.
 * The footer is then put right behind the slots, unsynced: if a power loss takes it, the
 * old footer and its journal, which matches the slots, are still whole. */
int ff2_release(ff_file *f)
{
    if (f->v2.j_pending || f->v2.footerless)
        return 0;
    if (f->v2.j_len && f->v2.j_live) {
        int rc = ff2_sync(f);
        if (rc < 0)
            return rc;
        f->v2.fresh = f->v2.promised = f->n_stored;
    }
    if (f->v2.j_len == 0 && !f->v2.paired &&
        (f->v2.disk_fresh >= f->v2.fresh || f->v2.fresh > f->n_stored))
        return 0;
    return ff2_settle(f, f->v2.size, f->v2.tail,
                      f->v2.fresh < f->n_stored ? f->v2.fresh : f->n_stored);
}

/* An fsync with nothing to commit, after its sync: every block is promised, and the footer
 * says so, or a later open would take them for blocks nobody was promised. */
int ff2_promise(ff_file *f)
{
    if (f->v2.j_pending || f->v2.footerless)
        return 0;
    f->v2.j_live = 0;                  /* the caller's sync put the slots on the disk */
    f->v2.fresh = f->v2.promised = f->n_stored;
    /* a journal kept at rest is dead now too: the footer goes back behind the slots */
    return f->v2.disk_fresh >= f->n_stored && f->v2.j_len == 0 && !f->v2.paired
               ? 0
               : ff2_settle(f, f->v2.size, f->v2.tail, f->n_stored);
}
