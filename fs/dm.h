/* dm: the daemon's own parts (the fpgalz4fs program, not the core library): its options
 * (dm_opts.c), its store (dm_store.c), and start-up, mount and the FUSE loop (daemon.c). */
#ifndef FPGALZ4FS_DM_H
#define FPGALZ4FS_DM_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>

#include "eng.h"
#include "ffile.h"
#include "ops.h"
#include "sb.h"

/* Options as given, kept as text so that every value is checked with a clear message. */
struct dm_opts {
    char *engine;                      /* auto|sw|emu|xrt|cuda */
    char *sw_threads;                  /* software compression threads */
    char *cus;                         /* compute units */
    char *bufsets;                     /* buffer sets per compute unit */
    char *card_timeout_ms;             /* age of a card run that counts as a fault */
    char *xclbin;                      /* XRT: the xclbin */
    char *device;                      /* XRT: device index */
    char *xrt_kernel_model;            /* XRT noop shim: run the reference kernel */
    char *card_only;                   /* bricks wait for the card, never go to software */
    char *card_fill_us;                /* how long a brick may wait to fill while the card
                                          is busy */
    char *emu_card_mbps;               /* emulated card: kernel rate */
    char *emu_pcie_mbps;               /* emulated card: PCIe rate each way */
    char *emu_error_rate;              /* emulated card: fraction of runs that fail */
    char *emu_hang_rate;               /* emulated card: fraction that never complete */
    char *emu_corrupt_rate;            /* emulated card: fraction with a wrong byte */
    char *emu_vanish_after;            /* emulated card: runs before it is pulled out */
    char *emu_card_check;              /* emulated card: model a card that checks its output */
    char *mem_mb;                      /* decoded-block cache plus bricks in flight */
    char *file_version;                /* format version of new files */
    char *log;                         /* log file */
    char *backing;                     /* first non-option argument */
    char *mountpoint;                  /* second non-option argument */
    int extra_args;                    /* non-option arguments beyond the two */
    int foreground;                    /* -f (or -d) */
    int read_only;                     /* -o ro, unless a later -o rw */
    int noacl;                         /* -o noacl, unless a later -o acl */
    int nodirect;                      /* -o nodirect_writes, unless a later direct_writes */
    int dir_handles;                   /* -o dir_handles, unless a later nodir_handles */
    int help;                          /* -h, --help */
    int version;                       /* -V, --version */
};

/* Checked values. */
struct dm_config {
    int engine_auto;                   /* engine=auto: the choice is logged */
    eng_backend backend;               /* the engine that will be opened */
    unsigned long long sw_threads;     /* 0: one per online core */
    unsigned long long cus;            /* 0: all */
    unsigned long long bufsets;
    unsigned long long card_timeout_ms;
    unsigned long long device;
    unsigned long long xrt_kernel_model;
    unsigned long long card_only;
    unsigned long long card_fill_us;   /* 0: bricks start at once */
    unsigned long long emu_card_mbps;
    unsigned long long emu_pcie_mbps;
    double emu_error_rate;
    double emu_hang_rate;
    double emu_corrupt_rate;
    unsigned long long emu_vanish_after;
    unsigned long long emu_card_check;
    unsigned long long mem_mb;
    unsigned long long file_version;
    char *xclbin;                      /* absolute, or NULL */
    char *log;                         /* absolute, or NULL */
};

/* Everything the daemon holds, released in reverse order by dm_cleanup. */
struct fs_daemon {
    struct dm_opts opt;                /* as parsed */
    struct dm_config cfg;              /* as checked */
    struct fuse_args args;             /* what goes to fuse_session_new */
    char *backing;                     /* realpath of BACKING */
    char *mountpoint;                  /* realpath of MOUNTPOINT */
    int lock_fd;                       /* the store lock, held until exit */
    int report_fd;                     /* pipe to the waiting parent; -1 once reported */
    sb_super sb;                       /* the store's superblock */
    struct op_fs fs;                   /* what the handlers share (root_fd, engine, ...) */
    struct fuse_lowlevel_ops ops;      /* the handlers */
    struct fuse_session *se;           /* the FUSE session, once made */
    int signals_set;                   /* fuse_set_signal_handlers succeeded */
    int mounted;                       /* fuse_session_mount succeeded */
    uint64_t whole_before;             /* the clean mark (sb_mark_read): changes before are
                                          whole on the disk */
    int started_clean;                 /* the mark said clean, and now says dirty: a clean
                                          exit may say clean again */
};

/* ---- options (dm_opts.c) ---- */

/* mem_mb when not given: per_core MiB per online core or 256, whichever is more, never above
 * a sixteenth of the memory (dm_opts.c says why). */
#define DM_MEM_MB_PER_CORE 64ull
#define DM_MEM_MB_PER_CORE_CUDA 128ull
unsigned long long dm_default_mem_mb(unsigned long long per_core);
/* Parses the command line into dm->opt and checks it into dm->cfg; -1 after a message on
 * stderr. --help and --version only set their flags. */
int dm_parse(struct fs_daemon *dm);
void dm_usage(FILE *out);
void dm_version(void);
/* A message on stderr, "fpgalz4fs: " first; returns -1. */
int dm_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dm_opts_free(struct fs_daemon *dm);

/* ---- the store (dm_store.c) ---- */

/* Opens the backing directory and the mountpoint, reads the superblock, takes the store's
 * lock and checks that files can be reopened by handle; -1 after a message on stderr. */
int dm_prepare(struct fs_daemon *dm);
/* Reads the clean mark into fo's clean_ns and start_ns and, unless read-only, marks the
 * store in use; -1 after dm_fail. */
int dm_mark_dirty(struct fs_daemon *dm, ff_options *fo);
/* The sizes a clean unmount kept, into dm->fs.sizes (none is the normal case). */
void dm_sizes_load(struct fs_daemon *dm);
/* At unmount, after the last write: syncs, keeps the sizes, marks the store clean (only if
 * this mount found it clean). */
void dm_mark_clean(struct fs_daemon *dm);

/* ---- start-up (daemon.c) ---- */

/* Reports a start-up failure: to the waiting parent, or to stderr in the foreground; into
 * the log too once there is one. Returns -1. */
int dm_fail(struct fs_daemon *dm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
