/* chk2: checking, repairing and measuring version 2 files for the tools (chk.h calls it for
 * every backing file whose marker says version 2). */
#ifndef FPGALZ4FS_CHK2_H
#define FPGALZ4FS_CHK2_H

#include <stdint.h>

#include "chk.h"
#include "fmt2.h"

/* As chk_file, for a version 2 file whose slots lie as g says; *wrote is set when it wrote. */
int chk2_file(int fd, fmt2_geo g, uint64_t file_len, chk_mode mode, int check_fresh,
              chk_say_fn say, void *ctx, chk_result *out, int *wrote);
/* As chk_stat_file (kind, apparent and disk already filled). */
int chk2_stat_file(int fd, fmt2_geo g, uint64_t file_len, chk_stat *out);

#endif
