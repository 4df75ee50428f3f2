#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define SB_HEADER "# fpgalz4fs superblock: do not edit (checked by the checksum line)\n"
#define SB_CHECKSUM_KEY "checksum="
#define SB_LOCK_TRIES 8

/* The keys a superblock must hold, each exactly once. */
enum { SB_KEY_VERSION, SB_KEY_BLOCK_SIZE, SB_KEY_UUID, SB_KEY_CREATED, SB_KEY_COUNT };
static const char *const sb_key_names[SB_KEY_COUNT] = {
    "format_version", "block_size", "uuid", "created",
};

/* One line of text: [start, start + len), without its newline. */
typedef struct {
    const char *start;
    size_t len;
} sb_span;

const char *sb_error_name(sb_error e)
{
    switch (e) {
    case SB_OK: return "ok";
    case SB_ERR_MISSING: return "no superblock (not a fpgalz4fs store)";
    case SB_ERR_IO: return "input/output error";
    case SB_ERR_CORRUPT: return "corrupt superblock";
    case SB_ERR_NEWER: return "store has a newer format version than this build supports";
    case SB_ERR_BLOCK_SIZE: return "unsupported block size";
    case SB_ERR_LOCKED: return "store is in use by another process";
    case SB_ERR_NOT_REGULAR: return "the superblock is a symlink or not a regular file";
    }
    return "unknown error";
}

const char *sb_block_size_name(uint32_t size)
{
    switch (size) {
    case 64u << 10: return "64K";
    case 256u << 10: return "256K";
    case 1u << 20: return "1M";
    case 4u << 20: return "4M";
    }
    return "?";
}

int sb_block_size_valid(uint32_t size)
{
    return size == (64u << 10) || size == (256u << 10) || size == (1u << 20) ||
           size == (4u << 20);
}

/* Decimal digits only: no sign, no spaces, no empty string, no overflow past max. */
static int sb_parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

uint32_t sb_parse_block_size(const char *text)
{
    if (!text)
        return 0;
    size_t len = strlen(text);
    uint64_t unit = 1, v;
    if (len > 0 && (text[len - 1] == 'K' || text[len - 1] == 'k'))
        unit = 1u << 10;
    else if (len > 0 && (text[len - 1] == 'M' || text[len - 1] == 'm'))
        unit = 1u << 20;
    if (unit != 1)
        len--;
    if (sb_parse_u64(text, len, UINT32_MAX / unit, &v) != 0)
        return 0;
    return sb_block_size_valid((uint32_t)(v * unit)) ? (uint32_t)(v * unit) : 0;
}

void sb_uuid_text(const uint8_t uuid[16], char out[37])
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[uuid[i] >> 4];
        out[o++] = hex[uuid[i] & 15];
    }
    out[o] = '\0';
}

static int sb_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;   /* we only ever write lowercase, so anything else was not written by us */
}

static int sb_parse_uuid(const char *s, size_t len, uint8_t uuid[16])
{
    if (len != 36)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return -1;
            continue;
        }
        int hi = sb_hex_value(s[i]), lo = sb_hex_value(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        uuid[o++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    return 0;
}

size_t sb_format(const sb_super *sb, char *out, size_t cap)
{
    char uuid[37];
    sb_uuid_text(sb->uuid, uuid);
    int body = snprintf(out, cap,
                        SB_HEADER "format_version=%" PRIu32 "\nblock_size=%" PRIu32
                        "\nuuid=%s\ncreated=%" PRId64 "\n",
                        sb->format_version, sb->block_size, uuid, sb->created);
    if (body < 0 || (size_t)body >= cap)
        return 0;
    uint32_t sum = XXH32(out, (size_t)body, 0);
    int tail = snprintf(out + body, cap - (size_t)body, SB_CHECKSUM_KEY "%08" PRIx32 "\n", sum);
    if (tail < 0 || (size_t)(body + tail) >= cap)
        return 0;
    return (size_t)(body + tail);
}

/* Splits off the checksum line, which must be the last line, and verifies it against every
 * byte before it. On success *body_len is the length of the checked part. */
static int sb_verify_checksum(const char *text, size_t len, size_t *body_len)
{
    const size_t key_len = sizeof(SB_CHECKSUM_KEY) - 1;
    size_t end = len;
    if (end > 0 && text[end - 1] == '\n')
        end--;
    size_t line = end;
    while (line > 0 && text[line - 1] != '\n')
        line--;
    if (end - line != key_len + 8 || memcmp(text + line, SB_CHECKSUM_KEY, key_len) != 0)
        return -1;
    uint32_t want = 0;
    for (size_t i = line + key_len; i < end; i++) {
        int d = sb_hex_value(text[i]);
        if (d < 0)
            return -1;
        want = want << 4 | (uint32_t)d;
    }
    if (XXH32(text, line, 0) != want)
        return -1;
    *body_len = line;
    return 0;
}

/* Returns the next line of text[*pos, len) and advances *pos past its newline. The body
 * always ends in a newline (it is followed by the checksum line), so no line is cut short. */
static int sb_next_line(const char *text, size_t len, size_t *pos, sb_span *line)
{
    if (*pos >= len)
        return 0;
    const char *nl = memchr(text + *pos, '\n', len - *pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    line->start = text + *pos;
    line->len = end - *pos;
    *pos = nl ? end + 1 : len;
    return 1;
}

/* Splits "key=value"; -1 when there is no '='. */
static int sb_split(const sb_span *line, sb_span *key, sb_span *value)
{
    const char *eq = memchr(line->start, '=', line->len);
    if (!eq)
        return -1;
    key->start = line->start;
    key->len = (size_t)(eq - line->start);
    value->start = eq + 1;
    value->len = line->len - key->len - 1;
    return 0;
}

static int sb_key_index(const sb_span *key)
{
    for (int i = 0; i < SB_KEY_COUNT; i++)
        if (strlen(sb_key_names[i]) == key->len &&
            memcmp(sb_key_names[i], key->start, key->len) == 0)
            return i;
    return -1;
}

/* A store written by a newer build may also change the rest of the layout, so its version is
 * looked at before anything else can fail: such a store is reported as newer, not corrupt. */
static int sb_is_newer(const char *text, size_t len, uint32_t *version)
{
    size_t pos = 0;
    sb_span line, key, value;
    while (sb_next_line(text, len, &pos, &line)) {
        uint64_t v;
        if (sb_split(&line, &key, &value) == 0 && sb_key_index(&key) == SB_KEY_VERSION &&
            sb_parse_u64(value.start, value.len, UINT32_MAX, &v) == 0) {
            *version = (uint32_t)v;    /* named in the error of a newer store */
            return v > SB_FORMAT_VERSION;
        }
    }
    return 0;
}

static int sb_parse_created(const sb_span *value, int64_t *created)
{
    uint64_t v;
    int negative = value->len > 0 && value->start[0] == '-';
    if (sb_parse_u64(value->start + negative, value->len - (size_t)negative,
                     (uint64_t)INT64_MAX, &v) != 0)
        return -1;
    *created = negative ? -(int64_t)v : (int64_t)v;
    return 0;
}

static int sb_parse_value(int key, const sb_span *value, sb_super *sb)
{
    uint64_t v;
    switch (key) {
    case SB_KEY_VERSION:
        if (sb_parse_u64(value->start, value->len, UINT32_MAX, &v) != 0 || v == 0)
            return -1;
        sb->format_version = (uint32_t)v;
        return 0;
    case SB_KEY_BLOCK_SIZE:
        if (sb_parse_u64(value->start, value->len, UINT32_MAX, &v) != 0)
            return -1;
        sb->block_size = (uint32_t)v;
        return 0;
    case SB_KEY_UUID:
        return sb_parse_uuid(value->start, value->len, sb->uuid);
    case SB_KEY_CREATED:
        return sb_parse_created(value, &sb->created);
    }
    return -1;
}

/* Every line is a '#' comment or a known key given once; every key must be present. */
static int sb_parse_body(const char *text, size_t len, sb_super *sb)
{
    int seen[SB_KEY_COUNT] = {0};
    size_t pos = 0;
    sb_span line, key, value;
    while (sb_next_line(text, len, &pos, &line)) {
        if (line.len > 0 && line.start[0] == '#')
            continue;
        if (sb_split(&line, &key, &value) != 0)
            return -1;
        int k = sb_key_index(&key);
        if (k < 0 || seen[k] || sb_parse_value(k, &value, sb) != 0)
            return -1;
        seen[k] = 1;
    }
    for (int i = 0; i < SB_KEY_COUNT; i++)
        if (!seen[i])
            return -1;
    return 0;
}

sb_error sb_parse(const char *text, size_t len, sb_super *sb)
{
    size_t body_len;
    sb_super tmp;
    if (!text || len > SB_MAX_TEXT || memchr(text, '\0', len))
        return SB_ERR_CORRUPT;
    if (sb_verify_checksum(text, len, &body_len) != 0)
        return SB_ERR_CORRUPT;
    if (sb_is_newer(text, body_len, &sb->format_version))
        return SB_ERR_NEWER;
    memset(&tmp, 0, sizeof(tmp));
    if (sb_parse_body(text, body_len, &tmp) != 0)
        return SB_ERR_CORRUPT;
    if (!sb_block_size_valid(tmp.block_size))
        return SB_ERR_BLOCK_SIZE;
    *sb = tmp;
    return SB_OK;
}

/* close() must not hide the errno of the call that failed before it. */
static void sb_close_keep_errno(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
}

/* Reads up to cap bytes; *got < cap means the whole file was read. */
static int sb_read_all(int fd, char *buf, size_t cap, size_t *got)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *got = n;
    return 0;
}

int sb_is_reserved_name(const char *name)
{
    return strncmp(name, SB_FILE_NAME, sizeof(SB_FILE_NAME) - 1) == 0;
}

/* Anyone who could write the top of the store could have put a symlink (to a file of
 * root's), a FIFO or a device where the superblock belongs: it is never followed (O_NOFOLLOW),
 * opening it never blocks (O_NONBLOCK) and only a regular file is used. */
static sb_error sb_open_super(int dirfd, int *out)
{
    struct stat st;
    int fd = openat(dirfd, SB_FILE_NAME,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SB_ERR_MISSING : errno == ELOOP ? SB_ERR_NOT_REGULAR
                                                                 : SB_ERR_IO;
    if (fstat(fd, &st) != 0) {
        sb_close_keep_errno(fd);
        return SB_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return SB_ERR_NOT_REGULAR;
    }
    *out = fd;
    return SB_OK;
}

sb_error sb_read(int dirfd, sb_super *sb)
{
    char buf[SB_MAX_TEXT + 1];
    size_t got;
    int fd;
    sb_error e = sb_open_super(dirfd, &fd);
    if (e != SB_OK)
        return e;
    if (sb_read_all(fd, buf, sizeof(buf), &got) != 0) {
        sb_close_keep_errno(fd);
        return SB_ERR_IO;
    }
    close(fd);
    if (got > SB_MAX_TEXT)
        return SB_ERR_CORRUPT;
    return sb_parse(buf, got, sb);
}

static int sb_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* dirfd may be an O_PATH descriptor, which fsync refuses, so the directory is reopened. */
static int sb_sync_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fsync(fd) != 0) {
        sb_close_keep_errno(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* The temporary file is complete and on disk before the rename, so a crash leaves either the
 * old superblock or the new one, never a torn one. A leftover temporary (a crash, or a
 * symlink someone planted to make root write elsewhere) is unlinked, which never follows it,
 * and the new one is created with O_EXCL | O_NOFOLLOW: if the name reappears in between,
 * the write fails instead of going through it. */
static int sb_write_tmp(int dirfd, const char *tmp, const char *text, size_t len)
{
    if (unlinkat(dirfd, tmp, 0) != 0 && errno != ENOENT)
        return -1;
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (sb_write_all(fd, text, len) != 0 || fsync(fd) != 0) {
        sb_close_keep_errno(fd);
        return -1;
    }
    return close(fd);
}

/* A superblock that is not a regular file was not written by us: refuse to replace it, so
 * that whoever put it there has it looked at (the rename alone would not follow it). */
static sb_error sb_check_existing(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? SB_OK : SB_ERR_IO;
    return S_ISREG(st.st_mode) ? SB_OK : SB_ERR_NOT_REGULAR;
}

/* name gets text whole or keeps what it had, through tmp. */
static sb_error sb_replace(int dirfd, const char *name, const char *tmp, const char *text,
                           size_t len)
{
    sb_error e = sb_check_existing(dirfd, name);
    if (e != SB_OK)
        return e;
    if (sb_write_tmp(dirfd, tmp, text, len) != 0 || renameat(dirfd, tmp, dirfd, name) != 0) {
        int saved = errno;
        unlinkat(dirfd, tmp, 0);
        errno = saved;
        return SB_ERR_IO;
    }
    return sb_sync_dir(dirfd) == 0 ? SB_OK : SB_ERR_IO;
}

sb_error sb_write(int dirfd, const sb_super *sb)
{
    char text[SB_MAX_TEXT];
    size_t len = sb_format(sb, text, sizeof(text));
    if (len == 0)
        return SB_ERR_CORRUPT;
    return sb_replace(dirfd, SB_FILE_NAME, SB_TMP_NAME, text, len);
}

sb_error sb_mark_read(int dirfd, uint64_t *ns, int *clean)
{
    *ns = 0, *clean = 0;
    int fd = openat(dirfd, SB_CLEAN_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SB_OK : errno == ELOOP ? SB_ERR_NOT_REGULAR : SB_ERR_IO;
    struct stat st;
    char text[64];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, text, sizeof(text) - 1)
                                                           : -2;
    close(fd);
    if (n == -2)
        return SB_ERR_NOT_REGULAR;
    if (n > 0)
        sb_mark_parse(text, (size_t)n, ns, clean);
    return SB_OK;                      /* unreadable: nothing is known whole */
}

int sb_mark_parse(const char *text, size_t len, uint64_t *ns, int *clean)
{
    char line[64];
    if (len == 0 || len >= sizeof(line) || text[len - 1] != '\n')
        return -1;
    memcpy(line, text, len);
    line[len - 1] = '\0';
    int c = strncmp(line, "clean ", 6) == 0, d = strncmp(line, "dirty ", 6) == 0;
    const char *digits = line + 6;
    if ((!c && !d) || !*digits || strspn(digits, "0123456789") != strlen(digits) ||
        strlen(digits) > 19)
        return -1;
    *ns = strtoull(digits, NULL, 10), *clean = c;
    return 0;
}

sb_error sb_mark_write(int dirfd, uint64_t ns, int clean)
{
    char text[64];
    int len = snprintf(text, sizeof(text), "%s %llu\n", clean ? "clean" : "dirty",
                       (unsigned long long)ns);
    return sb_replace(dirfd, SB_CLEAN_NAME, SB_CLEAN_TMP_NAME, text, (size_t)len);
}

sb_error sb_init(sb_super *sb, uint32_t block_size)
{
    if (!sb_block_size_valid(block_size))
        return SB_ERR_BLOCK_SIZE;
    memset(sb, 0, sizeof(*sb));
    size_t got = 0;
    while (got < sizeof(sb->uuid)) {
        ssize_t r = getrandom(sb->uuid + got, sizeof(sb->uuid) - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return SB_ERR_IO;
        got += (size_t)r;
    }
    sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40);   /* RFC 4122 version 4 */
    sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
    sb->format_version = SB_FORMAT_VERSION;
    sb->block_size = block_size;
    sb->created = (int64_t)time(NULL);
    return SB_OK;
}

/* The superblock can be replaced by rename between our open and our flock, leaving us holding
 * a lock on a file nobody else will ever open; the lock only counts if the name still leads to
 * the inode we locked. */
static int sb_lock_is_current(int dirfd, int fd)
{
    struct stat held, named;
    if (fstat(fd, &held) != 0 ||
        fstatat(dirfd, SB_FILE_NAME, &named, AT_SYMLINK_NOFOLLOW) != 0)
        return -1;
    return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

sb_error sb_lock(int dirfd, int *lock_fd)
{
    for (int tries = 0; tries < SB_LOCK_TRIES; tries++) {
        int fd;
        sb_error e = sb_open_super(dirfd, &fd);
        if (e != SB_OK)
            return e;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int locked = errno == EWOULDBLOCK;
            sb_close_keep_errno(fd);
            return locked ? SB_ERR_LOCKED : SB_ERR_IO;
        }
        int current = sb_lock_is_current(dirfd, fd);
        if (current == 1) {
            *lock_fd = fd;
            return SB_OK;
        }
        sb_close_keep_errno(fd);
        if (current < 0 && errno != ENOENT)
            return SB_ERR_IO;
    }
    return SB_ERR_LOCKED;   /* the superblock keeps being replaced under us: someone is busy */
}
