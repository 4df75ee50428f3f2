/* in: the inode table's cache of directory descriptors (fs/inode.c, in_dir_get). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inode.h"

#define N_DIRS 100u

typedef struct {
    char root[64];
    int root_fd;
    in_table *t;
    struct in_inode *n[N_DIRS];
    ino_t ino[N_DIRS];
    unsigned base;                     /* descriptors open before the table cached any */
} icase;

static unsigned open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;                      /* the listing's own */
}

static void icase_new(icase *c)
{
    snprintf(c->root, sizeof(c->root), "/tmp/test_inode.XXXXXX");
    assert_non_null(mkdtemp(c->root));
    c->root_fd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);   /* as the daemon's */
    assert_true(c->root_fd >= 0);
    assert_int_equal(in_table_new(c->root_fd, NULL, &c->t), 0);
    for (unsigned i = 0; i < N_DIRS; i++) {
        char name[16];
        struct stat st;
        snprintf(name, sizeof(name), "d%u", i);
        assert_int_equal(mkdirat(c->root_fd, name, 0755), 0);
        assert_int_equal(in_lookup_at(c->t, c->root_fd, name, &st, &c->n[i]), 0);
        c->ino[i] = st.st_ino;
    }
    c->base = open_fds();
}

static void icase_free(icase *c)
{
    for (unsigned i = 0; i < N_DIRS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "d%u", i);
        unlinkat(c->root_fd, name, AT_REMOVEDIR);
    }
    in_table_free(c->t);
    close(c->root_fd);
    rmdir(c->root);
}

/* A borrowed descriptor is the directory's own. */
static void get_check(icase *c, unsigned i, in_dirfd *d)
{
    struct stat st;
    assert_int_equal(in_dir_get(c->t, c->n[i], d), 0);
    assert_int_equal(fstat(d->fd, &st), 0);
    assert_int_equal(st.st_ino, c->ino[i]);
    assert_true(S_ISDIR(st.st_mode));
}

static void test_root_is_the_table_fd(void **state)
{
    (void)state;
    icase c;
    icase_new(&c);
    in_dirfd d;
    assert_int_equal(in_dir_get(c.t, in_root(c.t), &d), 0);
    assert_int_equal(d.fd, c.root_fd);
    assert_null(d.n);
    assert_int_equal(d.owned, 0);
    in_dir_put(c.t, &d);
    assert_int_equal(open_fds(), c.base);
    icase_free(&c);
}

/* Used one after the other, more directories than the bound keep at most IN_DIR_FDS
 * descriptors; a directory used again is served from the cache. */
static void test_bounded(void **state)
{
    (void)state;
    icase c;
    icase_new(&c);
    for (unsigned round = 0; round < 2; round++)
        for (unsigned i = 0; i < N_DIRS; i++) {
            in_dirfd d;
            get_check(&c, i, &d);
            assert_ptr_equal(d.n, c.n[i]);
            in_dir_put(c.t, &d);
            assert_true(open_fds() <= c.base + IN_DIR_FDS);
        }
    assert_int_equal(open_fds(), c.base + IN_DIR_FDS);
    in_dirfd a, b;
    get_check(&c, N_DIRS - 1, &a);     /* the most recent: cached, the same descriptor */
    get_check(&c, N_DIRS - 1, &b);
    assert_int_equal(a.fd, b.fd);
    in_dir_put(c.t, &b);
    in_dir_put(c.t, &a);
    assert_int_equal(open_fds(), c.base + IN_DIR_FDS);
    icase_free(&c);
}

/* Borrowed descriptors are never closed under their users: with every cached one in use,
 * a get opens one of its own, which its put closes. */
static void test_borrowed_stay_open(void **state)
{
    (void)state;
    icase c;
    icase_new(&c);
    in_dirfd d[N_DIRS];
    for (unsigned i = 0; i < N_DIRS; i++) {
        get_check(&c, i, &d[i]);
        assert_int_equal(d[i].owned, i >= IN_DIR_FDS);
    }
    assert_int_equal(open_fds(), c.base + N_DIRS);
    for (unsigned i = 0; i < N_DIRS; i++) {   /* each still the directory it was */
        struct stat st;
        assert_int_equal(fstat(d[i].fd, &st), 0);
        assert_int_equal(st.st_ino, c.ino[i]);
    }
    for (unsigned i = 0; i < N_DIRS; i++)
        in_dir_put(c.t, &d[i]);
    assert_int_equal(open_fds(), c.base + IN_DIR_FDS);
    icase_free(&c);
}

/* A forgotten inode closes its descriptor; one forgotten while borrowed lives until the put. */
static void test_forget_closes(void **state)
{
    (void)state;
    icase c;
    icase_new(&c);
    in_dirfd d;
    for (unsigned i = 0; i < 10; i++) {
        get_check(&c, i, &d);
        in_dir_put(c.t, &d);
    }
    assert_int_equal(open_fds(), c.base + 10);
    get_check(&c, 0, &d);
    for (unsigned i = 0; i < N_DIRS; i++)
        in_forget(c.t, c.n[i], 1);
    assert_int_equal(open_fds(), c.base + 1);
    struct stat st;
    assert_int_equal(fstat(d.fd, &st), 0);
    assert_int_equal(st.st_ino, c.ino[0]);
    in_dir_put(c.t, &d);
    assert_int_equal(open_fds(), c.base);
    icase_free(&c);
}

/* A directory removed while cached: names in it are not found, as in the kernel. */
static void test_removed_directory(void **state)
{
    (void)state;
    icase c;
    icase_new(&c);
    in_dirfd d;
    get_check(&c, 3, &d);
    in_dir_put(c.t, &d);
    assert_int_equal(unlinkat(c.root_fd, "d3", AT_REMOVEDIR), 0);
    assert_int_equal(in_dir_get(c.t, c.n[3], &d), 0);
    errno = 0;
    assert_true(openat(d.fd, "x", O_PATH | O_CLOEXEC) < 0);
    assert_int_equal(errno, ENOENT);
    assert_true(mkdirat(d.fd, "x", 0755) < 0);
    assert_int_equal(errno, ENOENT);
    in_dir_put(c.t, &d);
    icase_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_is_the_table_fd),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_borrowed_stay_open),
        cmocka_unit_test(test_forget_closes),
        cmocka_unit_test(test_removed_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
