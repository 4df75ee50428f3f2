/* xb: the compute units of one kernel, read from an xclbin file's IP_LAYOUT section without
 * XRT, so that a wrong or missing xclbin is reported clearly before XRT is touched, and so
 * that the backend can open one kernel handle per compute unit by its instance name. */
#ifndef FPGALZ4FS_XRT_XCLBIN_H
#define FPGALZ4FS_XRT_XCLBIN_H

#include <stddef.h>

#define XB_MAX_CUS 16u
#define XB_NAME_CAP 64u                /* as ip_data.m_name */

typedef struct {
    unsigned n;                        /* compute units of the kernel, in IP_LAYOUT order */
    char cu[XB_MAX_CUS][XB_NAME_CAP];  /* instance names ("xilLz4Compress_1") */
} xb_cus;

/* Reads path's compute units of kernel; 0, or -1 with the reason in err (not an xclbin, no
 * IP_LAYOUT, no compute unit of that kernel: then err lists the IPs the xclbin has). */
int xb_find_cus(const char *path, const char *kernel, xb_cus *out, char *err, size_t err_cap);

#endif
