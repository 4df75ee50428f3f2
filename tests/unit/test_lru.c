/* lru: the intrusive list the daemon's three bounded caches share (fs/lru.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lru.h"

struct item {
    int id;
    lru_node node;
};

/* The ids from the front (most recent) to the back, then back to front: both directions
 * must agree, and the ends must be NULL-terminated. */
static void expect_order(const lru_list *l, const int *ids, size_t n)
{
    size_t k = 0;
    for (lru_node *at = l->head; at; at = at->next, k++) {
        assert_true(k < n);
        assert_int_equal(LRU_ENTRY(at, struct item, node)->id, ids[k]);
    }
    assert_int_equal(k, n);
    for (lru_node *at = l->tail; at; at = at->prev) {
        assert_true(k > 0);
        assert_int_equal(LRU_ENTRY(at, struct item, node)->id, ids[--k]);
    }
    assert_int_equal(k, 0);
}

static void test_push_is_most_recent(void **state)
{
    (void)state;
    lru_list l = {0};
    struct item a = {1, {0}}, b = {2, {0}}, c = {3, {0}};
    expect_order(&l, NULL, 0);
    lru_push(&l, &a.node);
    expect_order(&l, (int[]){1}, 1);
    lru_push(&l, &b.node);
    lru_push(&l, &c.node);
    expect_order(&l, (int[]){3, 2, 1}, 3);
    assert_ptr_equal(LRU_ENTRY(l.tail, struct item, node), &a);
}

/* Unlinking the middle, the head and the tail; an unlinked node has no neighbours, so it
 * can be pushed again. */
static void test_unlink_anywhere(void **state)
{
    (void)state;
    lru_list l = {0};
    struct item v[4] = {{1, {0}}, {2, {0}}, {3, {0}}, {4, {0}}};
    for (int i = 0; i < 4; i++)
        lru_push(&l, &v[i].node);
    lru_unlink(&l, &v[2].node);        /* the middle */
    expect_order(&l, (int[]){4, 2, 1}, 3);
    assert_null(v[2].node.prev);
    assert_null(v[2].node.next);
    lru_unlink(&l, &v[3].node);        /* the head */
    expect_order(&l, (int[]){2, 1}, 2);
    lru_unlink(&l, &v[0].node);        /* the tail */
    expect_order(&l, (int[]){2}, 1);
    lru_unlink(&l, &v[1].node);        /* the last one */
    expect_order(&l, NULL, 0);
    assert_null(l.head);
    assert_null(l.tail);
    lru_push(&l, &v[2].node);
    expect_order(&l, (int[]){3}, 1);
}

/* A touch moves a node to the front and keeps every other in its order; touching the
 * head changes nothing. */
static void test_touch(void **state)
{
    (void)state;
    lru_list l = {0};
    struct item v[3] = {{1, {0}}, {2, {0}}, {3, {0}}};
    for (int i = 0; i < 3; i++)
        lru_push(&l, &v[i].node);
    lru_touch(&l, &v[0].node);         /* the tail */
    expect_order(&l, (int[]){1, 3, 2}, 3);
    lru_touch(&l, &v[2].node);         /* the middle */
    expect_order(&l, (int[]){3, 1, 2}, 3);
    lru_touch(&l, &v[2].node);         /* the head */
    expect_order(&l, (int[]){3, 1, 2}, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_is_most_recent),
        cmocka_unit_test(test_unlink_anywhere),
        cmocka_unit_test(test_touch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
