/* fpgalz4fs-mkxclbin [--cus N] [--kernel NAME] OUT: writes a metadata-only xclbin for the
 * xilLz4Compress kernel contract, so that the XRT backend can be tested under XRT's noop shim
 * (XCL_EMULATION_MODE=noop), which parses an xclbin's metadata but never needs a bitstream.
 *
 * The file holds what XRT reads to open kernels and place buffers, built with the structs of
 * <xclbin.h>: EMBEDDED_METADATA (the kernel's XML: its ports, the six arguments with their
 * register offsets, one instance per compute unit), MEM_TOPOLOGY (one DDR bank per compute
 * unit, as Xilinx's LZ4 host code places them), IP_LAYOUT (one IP_KERNEL "NAME:NAME_i" per
 * compute unit) and CONNECTIVITY (each buffer argument of compute unit i on bank i). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xclbin.h>

#define MK_MAX_CUS 16
#define MK_MAX_NAME 24                 /* "NAME:NAME_16" must fit ip_data.m_name (64) */
#define MK_BUF_ARGS 4                  /* in, out, compressd_size, in_block_size */
#define MK_SECTIONS 4
#define MK_CU_BASE 0x1800000ull        /* control registers of compute unit 0 */
#define MK_CU_RANGE 0x10000ull
#define MK_BANK_KB (16ull << 20)       /* 16 GiB per bank, in KiB as mem_data wants */
#define MK_BANK_BASE 0x4000000000ull

typedef struct {
    unsigned cus;
    const char *kernel;
    const char *out;
} mk_args;

/* One argument of the kernel contract: the order is the argument index. */
typedef struct {
    const char *name, *type, *port;
    unsigned offset, size, pointer;
} mk_arg;

static const mk_arg mk_contract[] = {
    {"in", "ap_uint&lt;512&gt;*", "M_AXI_GMEM0", 0x10, 8, 1},
    {"out", "ap_uint&lt;512&gt;*", "M_AXI_GMEM0", 0x1c, 8, 1},
    {"compressd_size", "uint*", "M_AXI_GMEM1", 0x28, 8, 1},
    {"in_block_size", "uint*", "M_AXI_GMEM1", 0x34, 8, 1},
    {"block_size_in_kb", "uint", "S_AXI_CONTROL", 0x40, 4, 0},
    {"input_size", "uint", "S_AXI_CONTROL", 0x48, 4, 0},
};

static int mk_usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "fpgalz4fs-mkxclbin: %s\n", msg);
    fprintf(stderr, "usage: fpgalz4fs-mkxclbin [--cus N] [--kernel NAME] OUT\n"
                    "  writes a metadata-only xclbin (no bitstream) for tests under XRT's noop\n"
                    "  shim: N compute units (1..%d, default 2) of kernel NAME (default\n"
                    "  xilLz4Compress), each on its own memory bank\n", MK_MAX_CUS);
    return 2;
}

static int mk_valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MK_MAX_NAME || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

static int mk_parse(int argc, char **argv, mk_args *a)
{
    *a = (mk_args){.cus = 2, .kernel = "xilLz4Compress"};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cus") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 1 || v > MK_MAX_CUS)
                return mk_usage("--cus: expected a number from 1 to 16");
            a->cus = (unsigned)v;
        } else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
            a->kernel = argv[++i];
            if (!mk_valid_name(a->kernel))
                return mk_usage("--kernel: expected a C identifier of at most 24 characters");
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            mk_usage(NULL);
            exit(0);
        } else if (argv[i][0] == '-' || a->out) {
            return mk_usage("unexpected argument");
        } else {
            a->out = argv[i];
        }
    }
    return a->out ? 0 : mk_usage("no output file given");
}

/* ---- the sections ---- */

typedef struct {
    char *data;
    size_t len, cap;
} mk_buf;

static int mk_append(mk_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d, b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int mk_printf(mk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int mk_printf(mk_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= sizeof(line) ? -1 : mk_append(b, line, (size_t)n);
}

/* The kernel's XML, which XRT reads for the argument layout and the register map. */
static int mk_xml(mk_buf *b, const mk_args *a)
{
    const char *k = a->kernel;
    int rc = mk_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<project name=\"%s\">\n"
                          " <platform vendor=\"xilinx\" boardid=\"noop\" name=\"noop\">\n"
                          "  <device name=\"fpga0\" fpgaDevice=\"noop\" addrWidth=\"0\">\n"
                          "   <core name=\"OCL_REGION_0\" target=\"hw\" type=\"clc_region\" "
                          "clockFreq=\"300MHz\" numComputeUnits=\"%u\">\n", k, a->cus);
    rc |= mk_printf(b, "    <kernel name=\"%s\" language=\"c\" vlnv=\"xilinx.com:hls:%s:1.0\" "
                       "preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" "
                       "interrupt=\"true\" hwControlProtocol=\"ap_ctrl_hs\">\n", k, k);
    rc |= mk_printf(b, "     <port name=\"M_AXI_GMEM0\" mode=\"master\" range=\"0xFFFFFFFF\" "
                       "dataWidth=\"512\" portType=\"addressable\" base=\"0x0\"/>\n"
                       "     <port name=\"M_AXI_GMEM1\" mode=\"master\" range=\"0xFFFFFFFF\" "
                       "dataWidth=\"32\" portType=\"addressable\" base=\"0x0\"/>\n"
                       "     <port name=\"S_AXI_CONTROL\" mode=\"slave\" range=\"0x1000\" "
                       "dataWidth=\"32\" portType=\"addressable\" base=\"0x0\"/>\n");
    for (unsigned i = 0; i < sizeof(mk_contract) / sizeof(mk_contract[0]); i++) {
        const mk_arg *g = &mk_contract[i];
        rc |= mk_printf(b, "     <arg name=\"%s\" addressQualifier=\"%u\" id=\"%u\" port=\"%s\" "
                           "size=\"0x%x\" offset=\"0x%x\" hostOffset=\"0x0\" hostSize=\"0x%x\" "
                           "type=\"%s\"/>\n", g->name, g->pointer, i, g->port, g->size,
                        g->offset, g->size, g->type);
    }
    for (unsigned i = 0; i < a->cus; i++)
        rc |= mk_printf(b, "     <instance name=\"%s_%u\">\n"
                           "      <addrRemap base=\"0x%llx\" range=\"0x%llx\" "
                           "port=\"S_AXI_CONTROL\"/>\n"
                           "     </instance>\n", k, i + 1,
                        MK_CU_BASE + i * MK_CU_RANGE, MK_CU_RANGE);
    rc |= mk_printf(b, "    </kernel>\n   </core>\n  </device>\n </platform>\n</project>\n");
    return rc ? -1 : 0;
}

static int mk_mem_topology(mk_buf *b, const mk_args *a)
{
    int32_t count = (int32_t)a->cus;
    size_t head = offsetof(struct mem_topology, m_mem_data);
    char pad[8] = {0};
    if (mk_append(b, &count, sizeof(count)) || mk_append(b, pad, head - sizeof(count)))
        return -1;
    for (unsigned i = 0; i < a->cus; i++) {
        struct mem_data m;
        memset(&m, 0, sizeof(m));
        m.m_type = MEM_DDR4;
        m.m_used = 1;
        m.m_size = MK_BANK_KB;
        m.m_base_address = MK_BANK_BASE + i * MK_BANK_KB * 1024;
        snprintf((char *)m.m_tag, sizeof(m.m_tag), "bank%u", i);
        if (mk_append(b, &m, sizeof(m)))
            return -1;
    }
    return 0;
}

static int mk_ip_layout(mk_buf *b, const mk_args *a)
{
    int32_t count = (int32_t)a->cus;
    size_t head = offsetof(struct ip_layout, m_ip_data);
    char pad[8] = {0};
    if (mk_append(b, &count, sizeof(count)) || mk_append(b, pad, head - sizeof(count)))
        return -1;
    for (unsigned i = 0; i < a->cus; i++) {
        struct ip_data ip;
        memset(&ip, 0, sizeof(ip));
        ip.m_type = IP_KERNEL;
        /* ap_ctrl_hs, interrupt enabled, interrupt id i */
        ip.properties = (AP_CTRL_HS << IP_CONTROL_SHIFT) | IP_INT_ENABLE_MASK |
                        ((i << IP_INTERRUPT_ID_SHIFT) & IP_INTERRUPT_ID_MASK);
        ip.m_base_address = MK_CU_BASE + i * MK_CU_RANGE;
        snprintf((char *)ip.m_name, sizeof(ip.m_name), "%s:%s_%u", a->kernel, a->kernel, i + 1);
        if (mk_append(b, &ip, sizeof(ip)))
            return -1;
    }
    return 0;
}

static int mk_connectivity(mk_buf *b, const mk_args *a)
{
    int32_t count = (int32_t)(a->cus * MK_BUF_ARGS);
    if (mk_append(b, &count, sizeof(count)))
        return -1;
    for (unsigned i = 0; i < a->cus; i++)
        for (int arg = 0; arg < MK_BUF_ARGS; arg++) {
            struct connection c = {.arg_index = arg, .m_ip_layout_index = (int32_t)i,
                                   .mem_data_index = (int32_t)i};
            if (mk_append(b, &c, sizeof(c)))
                return -1;
        }
    return 0;
}

/* ---- the container ---- */

static size_t mk_align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* A fresh uuid for the xclbin: XRT matches kernels to the xclbin loaded by it. */
static void mk_uuid(unsigned char *u)
{
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(u, 1, 16, f) != 16) {
        uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 16; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            u[i] = (unsigned char)(x >> 56);
    }
    if (f)
        fclose(f);
    u[6] = (unsigned char)((u[6] & 0x0F) | 0x40);   /* version 4 (random) */
    u[8] = (unsigned char)((u[8] & 0x3F) | 0x80);
}

static int mk_write(const mk_args *a, mk_buf sec[MK_SECTIONS])
{
    static const struct {
        enum axlf_section_kind kind;
        const char *name;
    } kinds[MK_SECTIONS] = {{EMBEDDED_METADATA, "metadata"}, {MEM_TOPOLOGY, "mem_topology"},
                            {IP_LAYOUT, "ip_layout"}, {CONNECTIVITY, "connectivity"}};
    size_t head = sizeof(struct axlf) + (MK_SECTIONS - 1) * sizeof(struct axlf_section_header);
    struct axlf *top = calloc(1, head);
    if (!top)
        return -1;
    memcpy(top->m_magic, "xclbin2", 8);
    top->m_signature_length = -1;
    memset(top->reserved, 0xFF, sizeof(top->reserved));
    memset(top->m_keyBlock, 0xFF, sizeof(top->m_keyBlock));
    top->m_header.m_timeStamp = (uint64_t)time(NULL);
    top->m_header.m_versionMajor = 2;
    top->m_header.m_versionMinor = 13;
    top->m_header.m_mode = XCLBIN_FLAT;
    snprintf((char *)top->m_header.m_platformVBNV, sizeof(top->m_header.m_platformVBNV),
             "xilinx:noop:fpgalz4fs:1.0");
    mk_uuid(top->m_header.uuid);
    top->m_uniqueId = top->m_header.m_timeStamp;
    top->m_header.m_numSections = MK_SECTIONS;
    size_t off = mk_align8(head);
    for (int i = 0; i < MK_SECTIONS; i++) {
        struct axlf_section_header *s = &top->m_sections[i];
        s->m_sectionKind = kinds[i].kind;
        snprintf(s->m_sectionName, sizeof(s->m_sectionName), "%s", kinds[i].name);
        s->m_sectionOffset = off;
        s->m_sectionSize = sec[i].len;
        off = mk_align8(off + sec[i].len);
    }
    top->m_header.m_length = off;

    FILE *f = fopen(a->out, "wb");
    if (!f) {
        fprintf(stderr, "fpgalz4fs-mkxclbin: %s: %s\n", a->out, strerror(errno));
        free(top);
        return -1;
    }
    static const char zeros[8];
    int bad = fwrite(top, 1, head, f) != head ||
              fwrite(zeros, 1, mk_align8(head) - head, f) != mk_align8(head) - head;
    for (int i = 0; i < MK_SECTIONS && !bad; i++) {
        size_t pad = mk_align8(sec[i].len) - sec[i].len;
        bad = fwrite(sec[i].data, 1, sec[i].len, f) != sec[i].len ||
              fwrite(zeros, 1, pad, f) != pad;
    }
    bad |= fclose(f) != 0;
    free(top);
    if (bad) {
        fprintf(stderr, "fpgalz4fs-mkxclbin: %s: write failed: %s\n", a->out, strerror(errno));
        unlink(a->out);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    mk_args a;
    int rc = mk_parse(argc, argv, &a);
    if (rc)
        return rc;
    mk_buf sec[MK_SECTIONS];
    memset(sec, 0, sizeof(sec));
    if (mk_xml(&sec[0], &a) || mk_mem_topology(&sec[1], &a) || mk_ip_layout(&sec[2], &a) ||
        mk_connectivity(&sec[3], &a)) {
        fprintf(stderr, "fpgalz4fs-mkxclbin: out of memory\n");
        rc = 1;
    } else {
        rc = mk_write(&a, sec) ? 1 : 0;
    }
    for (int i = 0; i < MK_SECTIONS; i++)
        free(sec[i].data);
    return rc;
}
