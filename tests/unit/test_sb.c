/* Unit tests of the superblock: text form, checksum, strict parsing, file I/O and the lock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* cmocka hands every test a state pointer that most tests have no use for. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "sb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define HEADER "# fpgalz4fs superblock: do not edit (checked by the checksum line)\n"
#define GOOD_UUID "0123abcd-4567-4890-a123-456789abcdef"

/* A scratch directory per test, removed (with whatever the test left in it) afterwards. */
typedef struct {
    char path[4096];
    int fd;
} scratch;

static int scratch_setup(void **state)
{
    scratch *s = calloc(1, sizeof(*s));
    const char *tmp = getenv("TMPDIR");
    if (!s)
        return -1;
    snprintf(s->path, sizeof(s->path), "%s/test_sb.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    *state = s;
    if (!mkdtemp(s->path))
        return -1;
    s->fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return s->fd < 0 ? -1 : 0;
}

static int scratch_teardown(void **state)
{
    scratch *s = *state;
    DIR *d = opendir(s->path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(s->fd, e->d_name, 0);
    if (d)
        closedir(d);
    close(s->fd);
    rmdir(s->path);
    free(s);
    return 0;
}

/* body plus a correct checksum line: lets tests reach the checks that follow the checksum. */
static size_t with_checksum(const char *body, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%schecksum=%08x\n", body, XXH32(body, strlen(body), 0));
    assert_true(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static sb_error parse_body(const char *body)
{
    char text[SB_MAX_TEXT * 2];
    sb_super sb;
    size_t len = with_checksum(body, text, sizeof(text));
    return sb_parse(text, len, &sb);
}

static void write_file(int dirfd, const char *name, const char *text, size_t len)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static sb_super sample(void)
{
    sb_super sb = {.format_version = SB_FORMAT_VERSION, .block_size = 1u << 20,
                   .created = 1763769600};
    for (int i = 0; i < 16; i++)
        sb.uuid[i] = (uint8_t)(i * 17 + 3);
    return sb;
}

static void test_format_parse_round_trip(void **state)
{
    uint32_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};
    for (size_t i = 0; i < 4; i++) {
        sb_super in = sample(), out;
        char text[SB_MAX_TEXT];
        in.block_size = sizes[i];
        size_t len = sb_format(&in, text, sizeof(text));
        assert_true(len > 0 && len < sizeof(text));
        assert_int_equal(text[len], '\0');
        assert_int_equal(sb_parse(text, len, &out), SB_OK);
        assert_memory_equal(&in, &out, sizeof(in));
    }
}

static void test_format_text(void **state)
{
    sb_super sb = sample();
    char text[SB_MAX_TEXT], uuid[37];
    size_t len = sb_format(&sb, text, sizeof(text));
    sb_uuid_text(sb.uuid, uuid);
    char want[SB_MAX_TEXT];
    snprintf(want, sizeof(want),
             HEADER "format_version=7\nblock_size=1048576\nuuid=%s\ncreated=1763769600\n", uuid);
    char full[SB_MAX_TEXT];
    size_t want_len = with_checksum(want, full, sizeof(full));
    assert_int_equal(len, want_len);
    assert_string_equal(text, full);
}

static void test_format_short_buffer(void **state)
{
    sb_super sb = sample();
    char text[SB_MAX_TEXT];
    size_t len = sb_format(&sb, text, sizeof(text));
    assert_int_equal(sb_format(&sb, text, len), 0);   /* no room for the NUL */
    assert_int_equal(sb_format(&sb, text, 10), 0);
    assert_int_equal(sb_format(&sb, text, len + 1), len);
}

static void test_negative_created(void **state)
{
    sb_super in = sample(), out;
    char text[SB_MAX_TEXT];
    in.created = -12345;
    size_t len = sb_format(&in, text, sizeof(text));
    assert_int_equal(sb_parse(text, len, &out), SB_OK);
    assert_int_equal(out.created, -12345);
}

static void test_uuid_text(void **state)
{
    uint8_t uuid[16];
    char text[37];
    for (int i = 0; i < 16; i++)
        uuid[i] = (uint8_t)(0x10 * (i % 16) + (15 - i));
    sb_uuid_text(uuid, text);
    assert_string_equal(text, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
}

static void test_init(void **state)
{
    sb_super a, b;
    assert_int_equal(sb_init(&a, 256u << 10), SB_OK);
    assert_int_equal(sb_init(&b, 256u << 10), SB_OK);
    assert_int_equal(a.format_version, SB_FORMAT_VERSION);
    assert_int_equal(a.block_size, 256u << 10);
    assert_true(a.created > 1600000000);
    assert_int_equal(a.uuid[6] >> 4, 4);
    assert_int_equal(a.uuid[8] >> 6, 2);
    assert_memory_not_equal(a.uuid, b.uuid, 16);
    assert_int_equal(sb_init(&a, 12345), SB_ERR_BLOCK_SIZE);
    assert_int_equal(sb_init(&a, 0), SB_ERR_BLOCK_SIZE);
}

static void test_block_size_valid(void **state)
{
    assert_true(sb_block_size_valid(65536));
    assert_true(sb_block_size_valid(262144));
    assert_true(sb_block_size_valid(1048576));
    assert_true(sb_block_size_valid(4194304));
    assert_false(sb_block_size_valid(0));
    assert_false(sb_block_size_valid(131072));
    assert_false(sb_block_size_valid(8388608));
    assert_false(sb_block_size_valid(65535));
}

static void test_parse_block_size(void **state)
{
    static const struct {
        const char *text;
        uint32_t want;
    } cases[] = {
        {"64K", 64u << 10}, {"256K", 256u << 10}, {"1M", 1u << 20}, {"4M", 4u << 20},
        {"64k", 64u << 10}, {"1m", 1u << 20}, {"65536", 64u << 10}, {"262144", 256u << 10},
        {"1048576", 1u << 20}, {"4194304", 4u << 20}, {"1024K", 1u << 20}, {"4096K", 4u << 20},
        {"", 0}, {"K", 0}, {"M", 0}, {"0", 0}, {"0K", 0}, {"128K", 0}, {"2M", 0}, {"8M", 0},
        {"1G", 0}, {"64KB", 0}, {"64KiB", 0}, {" 1M", 0}, {"1M ", 0}, {"-1M", 0}, {"+1M", 0},
        {"1.0M", 0}, {"65535", 0}, {"4194305", 0}, {"99999999999999999999999K", 0},
        {"4294967296", 0}, {"4097M", 0}, {"abc", 0}, {"0x100000", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (sb_parse_block_size(cases[i].text) != cases[i].want)
            fail_msg("sb_parse_block_size(\"%s\")", cases[i].text);
    }
    assert_int_equal(sb_parse_block_size(NULL), 0);
}

static void test_parse_corrupt_text(void **state)
{
    sb_super sb;
    assert_int_equal(sb_parse("", 0, &sb), SB_ERR_CORRUPT);
    assert_int_equal(sb_parse("hello\n", 6, &sb), SB_ERR_CORRUPT);
    assert_int_equal(sb_parse("checksum=zzzzzzzz\n", 18, &sb), SB_ERR_CORRUPT);
    assert_int_equal(sb_parse("checksum=02cc5d05\n", 18, &sb), SB_ERR_CORRUPT);
}

static void test_parse_flipped_byte(void **state)
{
    sb_super in = sample(), out;
    char text[SB_MAX_TEXT];
    size_t len = sb_format(&in, text, sizeof(text));
    for (size_t i = 0; i < len; i++) {
        char copy[SB_MAX_TEXT];
        memcpy(copy, text, len);
        copy[i] ^= 0x04;
        if (sb_parse(copy, len, &out) != SB_ERR_CORRUPT)
            fail_msg("flipping byte %zu was not detected", i);
    }
    assert_int_equal(sb_parse(text, len - 1, &out), SB_OK);   /* final newline optional */
    assert_int_equal(sb_parse(text, len - 2, &out), SB_ERR_CORRUPT);
}

static void test_parse_strict_keys(void **state)
{
    const char *keys = "block_size=1048576\nuuid=" GOOD_UUID "\ncreated=1\n";
    char body[SB_MAX_TEXT];
    snprintf(body, sizeof(body), HEADER "format_version=1\n%s", keys);
    assert_int_equal(parse_body(body), SB_OK);
    /* missing each key in turn */
    assert_int_equal(parse_body(HEADER "block_size=1048576\nuuid=" GOOD_UUID "\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nuuid=" GOOD_UUID "\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=65536\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=65536\nuuid=" GOOD_UUID
                                       "\n"),
                     SB_ERR_CORRUPT);
    /* unknown, duplicated and malformed lines */
    snprintf(body, sizeof(body), HEADER "format_version=1\n%scolour=blue\n", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version=1\n%screated=2\n", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version=1\n%s\n", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version=1\n%sjunk\n", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version = 1\n%s", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version=0\n%s", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    snprintf(body, sizeof(body), HEADER "format_version=x\n%s", keys);
    assert_int_equal(parse_body(body), SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=1048576\n"
                                       "uuid=0123abcd-4567-4890-a123-456789abcde\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=1048576\n"
                                       "uuid=0123abcd-4567-4890-a123-456789abcdeg\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=1048576\n"
                                       "uuid=0123abcd-4567-4890-a123+456789abcdef\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=1M\nuuid=" GOOD_UUID
                                       "\ncreated=1\n"),
                     SB_ERR_CORRUPT);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=1048576\nuuid=" GOOD_UUID
                                       "\ncreated=soon\n"),
                     SB_ERR_CORRUPT);
}

static void test_parse_newer(void **state)
{
    /* newer wins over everything else that would otherwise be wrong with the text */
    assert_int_equal(parse_body(HEADER "format_version=8\nblock_size=1048576\nuuid=" GOOD_UUID
                                       "\ncreated=1\n"),
                     SB_ERR_NEWER);
    assert_int_equal(parse_body(HEADER "format_version=9\nblock_size=1048576\nuuid=" GOOD_UUID
                                       "\ncreated=1\ncompressor=zstd\n"),
                     SB_ERR_NEWER);
    assert_int_equal(parse_body(HEADER "block_size=3\nformat_version=99\n"), SB_ERR_NEWER);
    /* but a newer version under a bad checksum is just corruption */
    char text[SB_MAX_TEXT];
    sb_super sb;
    size_t len = with_checksum(HEADER "format_version=3\nblock_size=1048576\n", text,
                               sizeof(text));
    text[len - 2] = text[len - 2] == '0' ? '1' : '0';
    assert_int_equal(sb_parse(text, len, &sb), SB_ERR_CORRUPT);
}

static void test_parse_bad_block_size(void **state)
{
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=131072\nuuid=" GOOD_UUID
                                       "\ncreated=1\n"),
                     SB_ERR_BLOCK_SIZE);
    assert_int_equal(parse_body(HEADER "format_version=1\nblock_size=0\nuuid=" GOOD_UUID
                                       "\ncreated=1\n"),
                     SB_ERR_BLOCK_SIZE);
}

static void test_parse_too_long_or_nul(void **state)
{
    char big[SB_MAX_TEXT * 2];
    char body[SB_MAX_TEXT * 2];
    sb_super sb;
    memset(body, 0, sizeof(body));
    strcpy(body, HEADER "format_version=1\nblock_size=1048576\nuuid=" GOOD_UUID "\ncreated=1\n");
    size_t n = strlen(body);
    while (n < SB_MAX_TEXT)
        body[n++] = '#', body[n++] = '\n';
    body[n] = '\0';
    size_t len = with_checksum(body, big, sizeof(big));
    assert_int_equal(sb_parse(big, len, &sb), SB_ERR_CORRUPT);

    char text[SB_MAX_TEXT];
    sb_super in = sample();
    len = sb_format(&in, text, sizeof(text));
    text[3] = '\0';
    assert_int_equal(sb_parse(text, len, &sb), SB_ERR_CORRUPT);
}

static void test_write_read(void **state)
{
    scratch *s = *state;
    sb_super in, out;
    assert_int_equal(sb_init(&in, 4u << 20), SB_OK);
    assert_int_equal(sb_write(s->fd, &in), SB_OK);
    assert_int_equal(sb_read(s->fd, &out), SB_OK);
    assert_memory_equal(&in, &out, sizeof(in));
    struct stat st;
    assert_int_equal(fstatat(s->fd, ".fpgalz4fs.tmp", &st, 0), -1);
    assert_int_equal(fstatat(s->fd, SB_FILE_NAME, &st, 0), 0);
    assert_true(S_ISREG(st.st_mode));
    /* writing again replaces it */
    assert_int_equal(sb_init(&in, 64u << 10), SB_OK);
    assert_int_equal(sb_write(s->fd, &in), SB_OK);
    assert_int_equal(sb_read(s->fd, &out), SB_OK);
    assert_memory_equal(&in, &out, sizeof(in));
}

static void test_write_through_o_path(void **state)
{
    scratch *s = *state;
    sb_super in, out;
    int pfd = open(s->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(pfd >= 0);
    assert_int_equal(sb_init(&in, 1u << 20), SB_OK);
    assert_int_equal(sb_write(pfd, &in), SB_OK);
    assert_int_equal(sb_read(pfd, &out), SB_OK);
    assert_memory_equal(&in, &out, sizeof(in));
    close(pfd);
}

static void test_read_errors(void **state)
{
    scratch *s = *state;
    sb_super sb;
    char text[SB_MAX_TEXT];
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_MISSING);

    write_file(s->fd, SB_FILE_NAME, "not a superblock\n", 17);
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_CORRUPT);

    sb_super in = sample();
    size_t len = sb_format(&in, text, sizeof(text));
    text[20] ^= 1;
    write_file(s->fd, SB_FILE_NAME, text, len);
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_CORRUPT);

    len = with_checksum(HEADER "format_version=8\nblock_size=1048576\nuuid=" GOOD_UUID
                               "\ncreated=1\n",
                        text, sizeof(text));
    write_file(s->fd, SB_FILE_NAME, text, len);
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_NEWER);
    assert_int_equal(sb.format_version, 8);   /* named in the daemon's error */

    len = with_checksum(HEADER "format_version=1\nblock_size=2097152\nuuid=" GOOD_UUID
                               "\ncreated=1\n",
                        text, sizeof(text));
    write_file(s->fd, SB_FILE_NAME, text, len);
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_BLOCK_SIZE);

    char big[SB_MAX_TEXT + 100];
    memset(big, '#', sizeof(big));
    write_file(s->fd, SB_FILE_NAME, big, sizeof(big));
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_CORRUPT);
}

static void test_read_io_error(void **state)
{
    scratch *s = *state;
    sb_super sb;
    assert_int_equal(mkdirat(s->fd, SB_FILE_NAME, 0755), 0);
    assert_int_equal(sb_read(s->fd, &sb), SB_ERR_NOT_REGULAR);
    assert_int_equal(unlinkat(s->fd, SB_FILE_NAME, AT_REMOVEDIR), 0);
    assert_int_equal(sb_read(-1, &sb), SB_ERR_IO);
    assert_int_equal(errno, EBADF);
}

static void test_lock(void **state)
{
    scratch *s = *state;
    sb_super sb;
    int a = -1, b = -1;
    assert_int_equal(sb_lock(s->fd, &a), SB_ERR_MISSING);
    assert_int_equal(sb_init(&sb, 1u << 20), SB_OK);
    assert_int_equal(sb_write(s->fd, &sb), SB_OK);
    assert_int_equal(sb_lock(s->fd, &a), SB_OK);
    assert_true(a >= 0);
    assert_int_equal(sb_lock(s->fd, &b), SB_ERR_LOCKED);
    assert_int_equal(b, -1);
    /* the lock is still held after the superblock is read */
    assert_int_equal(sb_read(s->fd, &sb), SB_OK);
    assert_int_equal(sb_lock(s->fd, &b), SB_ERR_LOCKED);
    close(a);
    assert_int_equal(sb_lock(s->fd, &b), SB_OK);
    assert_true(b >= 0);
    assert_int_equal(fcntl(b, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(b);
}

/* The content of a file, or "" when it cannot be read. */
static const char *file_text(int dirfd, const char *name, char *buf, size_t cap)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? 0 : read(fd, buf, cap - 1);
    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return buf;
}

/* A user who could write the top of the store plants the superblock's temporary as a symlink
 * to root's file (or to a name that does not exist yet): the next write must go around it. */
static void test_write_planted_tmp(void **state)
{
    scratch *s = *state;
    sb_super in, out;
    char buf[256];
    struct stat st;
    write_file(s->fd, "victim", "root's file\n", 12);
    assert_int_equal(symlinkat("victim", s->fd, SB_TMP_NAME), 0);
    assert_int_equal(sb_init(&in, 1u << 20), SB_OK);
    assert_int_equal(sb_write(s->fd, &in), SB_OK);
    assert_string_equal(file_text(s->fd, "victim", buf, sizeof(buf)), "root's file\n");
    assert_int_equal(sb_read(s->fd, &out), SB_OK);
    assert_memory_equal(&in, &out, sizeof(in));
    assert_int_equal(fstatat(s->fd, SB_TMP_NAME, &st, AT_SYMLINK_NOFOLLOW), -1);

    assert_int_equal(symlinkat("created", s->fd, SB_TMP_NAME), 0);   /* dangling */
    assert_int_equal(sb_write(s->fd, &in), SB_OK);
    assert_int_equal(fstatat(s->fd, "created", &st, AT_SYMLINK_NOFOLLOW), -1);
}

/* A superblock that is a symlink (to a file holding a valid superblock, even) or a FIFO is
 * neither read, locked nor replaced. */
static void test_super_not_regular(void **state)
{
    scratch *s = *state;
    sb_super in, out;
    char text[SB_MAX_TEXT], buf[SB_MAX_TEXT];
    int fd = -1;
    struct stat st;
    assert_int_equal(sb_init(&in, 1u << 20), SB_OK);
    size_t len = sb_format(&in, text, sizeof(text));
    write_file(s->fd, "victim", text, len);
    assert_int_equal(symlinkat("victim", s->fd, SB_FILE_NAME), 0);
    assert_int_equal(sb_read(s->fd, &out), SB_ERR_NOT_REGULAR);
    assert_int_equal(sb_lock(s->fd, &fd), SB_ERR_NOT_REGULAR);
    assert_int_equal(fd, -1);
    assert_int_equal(sb_init(&out, 64u << 10), SB_OK);
    assert_int_equal(sb_write(s->fd, &out), SB_ERR_NOT_REGULAR);
    assert_int_equal(fstatat(s->fd, SB_FILE_NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    text[len] = '\0';
    assert_string_equal(file_text(s->fd, "victim", buf, sizeof(buf)), text);

    assert_int_equal(unlinkat(s->fd, SB_FILE_NAME, 0), 0);
    assert_int_equal(mkfifoat(s->fd, SB_FILE_NAME, 0644), 0);   /* would block a plain open */
    assert_int_equal(sb_read(s->fd, &out), SB_ERR_NOT_REGULAR);
    assert_int_equal(sb_lock(s->fd, &fd), SB_ERR_NOT_REGULAR);
}

static void test_reserved_names(void **state)
{
    assert_true(sb_is_reserved_name(SB_FILE_NAME));
    assert_true(sb_is_reserved_name(SB_TMP_NAME));
    assert_true(sb_is_reserved_name(".fpgalz4fs-convert.1f.tmp"));
    assert_true(sb_is_reserved_name(".fpgalz4fsX"));
    assert_false(sb_is_reserved_name(".fpgalz4f"));
    assert_false(sb_is_reserved_name("fpgalz4fs"));
    assert_false(sb_is_reserved_name("x.fpgalz4fs"));
    assert_false(sb_is_reserved_name(""));
}

static void test_error_names(void **state)
{
    for (int e = SB_OK; e <= SB_ERR_NOT_REGULAR; e++) {
        const char *name = sb_error_name((sb_error)e);
        assert_non_null(name);
        assert_true(strlen(name) > 0);
    }
    assert_non_null(sb_error_name((sb_error)99));
}

#define SCRATCH_TEST(f) cmocka_unit_test_setup_teardown(f, scratch_setup, scratch_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_parse_round_trip),
        cmocka_unit_test(test_format_text),
        cmocka_unit_test(test_format_short_buffer),
        cmocka_unit_test(test_negative_created),
        cmocka_unit_test(test_uuid_text),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_block_size_valid),
        cmocka_unit_test(test_parse_block_size),
        cmocka_unit_test(test_parse_corrupt_text),
        cmocka_unit_test(test_parse_flipped_byte),
        cmocka_unit_test(test_parse_strict_keys),
        cmocka_unit_test(test_parse_newer),
        cmocka_unit_test(test_parse_bad_block_size),
        cmocka_unit_test(test_parse_too_long_or_nul),
        SCRATCH_TEST(test_write_read),
        SCRATCH_TEST(test_write_through_o_path),
        SCRATCH_TEST(test_read_errors),
        SCRATCH_TEST(test_read_io_error),
        SCRATCH_TEST(test_lock),
        SCRATCH_TEST(test_write_planted_tmp),
        SCRATCH_TEST(test_super_not_regular),
        cmocka_unit_test(test_reserved_names),
        cmocka_unit_test(test_error_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
