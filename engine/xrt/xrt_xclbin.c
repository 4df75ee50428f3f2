/* Reads an xclbin's IP_LAYOUT with the structs of <xclbin.h>. A real xclbin is tens of MB
 * (mostly bitstream), so only the header, the section table and IP_LAYOUT are read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xclbin.h>

#include "xrt_xclbin.h"

#define XB_MAX_LAYOUT (1u << 20)       /* far more than any IP_LAYOUT (80 bytes an IP) */

static int xb_read_at(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

/* The IP_LAYOUT section, checked against the file's size; NULL with the reason in err. */
static struct ip_layout *xb_layout(int fd, const char *path, uint64_t *size_out, char *err,
                                   size_t err_cap)
{
    struct stat st;
    struct axlf top;
    if (fstat(fd, &st) != 0 || xb_read_at(fd, &top, sizeof(top), 0) != 0 ||
        memcmp(top.m_magic, "xclbin2", 8) != 0) {
        snprintf(err, err_cap, "%s is not an xclbin (no xclbin2 header)", path);
        return NULL;
    }
    uint32_t n = top.m_header.m_numSections;
    if (n == 0 || n > XCLBIN_MAX_NUM_SECTION) {
        snprintf(err, err_cap, "%s: bad section count %u", path, n);
        return NULL;
    }
    uint64_t table = offsetof(struct axlf, m_sections);
    for (uint32_t i = 0; i < n; i++) {
        struct axlf_section_header h;
        if (xb_read_at(fd, &h, sizeof(h), table + (uint64_t)i * sizeof(h)) != 0) {
            snprintf(err, err_cap, "%s: truncated section table", path);
            return NULL;
        }
        if (h.m_sectionKind != IP_LAYOUT)
            continue;
        if (h.m_sectionSize < offsetof(struct ip_layout, m_ip_data) ||
            h.m_sectionSize > XB_MAX_LAYOUT || h.m_sectionOffset > (uint64_t)st.st_size ||
            h.m_sectionSize > (uint64_t)st.st_size - h.m_sectionOffset) {
            snprintf(err, err_cap, "%s: IP_LAYOUT section out of bounds", path);
            return NULL;
        }
        struct ip_layout *ips = malloc(h.m_sectionSize);
        if (!ips || xb_read_at(fd, ips, h.m_sectionSize, h.m_sectionOffset) != 0) {
            snprintf(err, err_cap, "%s: cannot read IP_LAYOUT", path);
            free(ips);
            return NULL;
        }
        *size_out = h.m_sectionSize;
        return ips;
    }
    snprintf(err, err_cap, "%s has no IP_LAYOUT section (no compute units)", path);
    return NULL;
}

/* The names of the kernel IPs, for a message saying what the xclbin holds instead. */
static void xb_list(const struct ip_layout *ips, int32_t count, char *err, size_t err_cap)
{
    size_t len = strlen(err);
    const char *sep = " (it has: ";
    for (int32_t i = 0; i < count && len < err_cap; i++) {
        const struct ip_data *ip = &ips->m_ip_data[i];
        if (ip->m_type != IP_KERNEL)
            continue;
        len += (size_t)snprintf(err + len, err_cap - len, "%s%.*s", sep, (int)XB_NAME_CAP,
                                (const char *)ip->m_name);
        sep = ", ";
    }
    if (len < err_cap)
        snprintf(err + len, err_cap - len, "%s", *sep == ',' ? ")" : " (it has no kernels)");
}

static void xb_collect(const struct ip_layout *ips, int32_t count, const char *kernel,
                       xb_cus *out)
{
    size_t klen = strlen(kernel);
    for (int32_t i = 0; i < count && out->n < XB_MAX_CUS; i++) {
        const struct ip_data *ip = &ips->m_ip_data[i];
        char name[XB_NAME_CAP + 1];
        memcpy(name, ip->m_name, XB_NAME_CAP);
        name[XB_NAME_CAP] = '\0';
        if (ip->m_type != IP_KERNEL || strncmp(name, kernel, klen) != 0 || name[klen] != ':' ||
            name[klen + 1] == '\0')
            continue;
        snprintf(out->cu[out->n++], XB_NAME_CAP, "%s", name + klen + 1);
    }
}

int xb_find_cus(const char *path, const char *kernel, xb_cus *out, char *err, size_t err_cap)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_cap, "xclbin %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t size = 0;
    struct ip_layout *ips = xb_layout(fd, path, &size, err, err_cap);
    close(fd);
    if (!ips)
        return -1;
    int32_t max = (int32_t)((size - offsetof(struct ip_layout, m_ip_data)) /
                            sizeof(struct ip_data));
    int32_t count = ips->m_count < 0 ? 0 : ips->m_count > max ? max : ips->m_count;
    xb_collect(ips, count, kernel, out);
    if (out->n == 0) {
        snprintf(err, err_cap, "xclbin %s has no compute unit of kernel %s", path, kernel);
        xb_list(ips, count, err, err_cap);
    }
    free(ips);
    return out->n ? 0 : -1;
}
