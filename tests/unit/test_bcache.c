/* Unit tests of the decoded-block cache (fs/bcache.c): lookups through its index agree with
 * a model over long random runs of claims, publishes, pins and forgets; a pinned slot keeps
 * its bytes (even forgotten) and is never handed out again until unpinned; a block longer
 * than a slot is refused; a second copy of a block replaces the first unless the first is
 * being sent; buffers taken out and adopted change hands without copies, never while a reply
 * sends from them; a block a sequential reader has passed is reused first. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* cmocka hands every test a state pointer that most tests have no use for. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "bcache.h"

#include <stdlib.h>
#include <string.h>

#define SLOT 4096u

/* Puts a block whose bytes all equal tag into the cache as (file, key); 0 if no slot. */
static int put(bc_cache *bc, uint64_t file, uint64_t key, uint8_t tag)
{
    uint32_t slot;
    uint8_t *p = bc_claim(bc, SLOT, &slot);
    if (!p)
        return 0;
    memset(p, tag, SLOT);
    bc_publish(bc, slot, file, key, SLOT);
    return 1;
}

/* The tag of (file, key) in the cache, or -1 on a miss. */
static int tag_of(bc_cache *bc, uint64_t file, uint64_t key)
{
    uint8_t b[2];
    if (!bc_get(bc, file, key, b, SLOT - 2, 2))
        return -1;
    assert_int_equal(b[0], b[1]);
    return b[0];
}

static void test_model(void **state)
{
    enum { SLOTS = 37, FILES = 5, KEYS = 40 };
    bc_cache *bc = bc_new(SLOT, SLOTS);
    int model[FILES + 1][KEYS];        /* the tag last published, or -1 */
    memset(model, -1, sizeof(model));
    unsigned seed = 12345;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        uint64_t file = 1 + (seed >> 8) % FILES, key = (seed >> 16) % KEYS;
        uint8_t tag = (uint8_t)(1 + (seed >> 24) % 250);
        if ((seed >> 4) % 97 == 0) {
            bc_forget_file(bc, file);
            for (int k = 0; k < KEYS; k++)
                model[file][k] = -1;
        } else if ((seed >> 4) % 3 == 0) {
            assert_int_equal(put(bc, file, key, tag), 1);
            model[file][key] = tag;
        } else {
            int got = tag_of(bc, file, key);
            /* a miss is an eviction; a hit must be the last tag published */
            assert_true(got == -1 || got == model[file][key]);
            assert_int_equal(bc_has(bc, file, key), got != -1);
        }
    }
    int cached = 0;
    for (uint64_t f = 1; f <= FILES; f++)
        for (uint64_t k = 0; k < KEYS; k++)
            cached += bc_has(bc, f, k);
    assert_true(cached <= SLOTS);
    assert_true(cached >= SLOTS - FILES);   /* eviction keeps the cache full */
    bc_free(bc);
}

static void test_pins(void **state)
{
    bc_cache *bc = bc_new(SLOT, 3);
    assert_int_equal(put(bc, 1, 10, 0xAA), 1);
    uint32_t pinned;
    const uint8_t *p = bc_pin(bc, 1, 10, 100, 200, &pinned);
    assert_non_null(p);
    assert_int_equal(p[0], 0xAA);
    bc_forget_file(bc, 1);             /* the reply still sends the bytes */
    assert_int_equal(tag_of(bc, 1, 10), -1);
    for (int i = 0; i < 20; i++)       /* churn: the pinned slot is never handed out */
        assert_int_equal(put(bc, 2, (uint64_t)i, (uint8_t)i), 1);
    assert_int_equal(p[0], 0xAA);
    assert_int_equal(p[199], 0xAA);
    bc_unpin(bc, pinned);
    uint32_t a, b, c;
    assert_non_null(bc_claim(bc, SLOT, &a));   /* every slot claimed: the next gets none */
    assert_non_null(bc_claim(bc, SLOT, &b));
    assert_non_null(bc_claim(bc, SLOT, &c));
    assert_null(bc_claim(bc, SLOT, &pinned));
    bc_unpin(bc, a), bc_unpin(bc, b), bc_unpin(bc, c);
    assert_null(bc_claim(bc, SLOT + 1, &a));   /* longer than a slot */
    bc_free(bc);
}

/* A claimed slot is named by nothing while it is being filled: its old block misses at
 * once, not only when the new one is published. */
static void test_claim_unnames(void **state)
{
    bc_cache *bc = bc_new(SLOT, 2);
    assert_int_equal(put(bc, 1, 1, 0x10), 1);
    assert_int_equal(put(bc, 1, 2, 0x20), 1);
    assert_int_equal(tag_of(bc, 1, 2), 0x20);  /* (1, 1) is now the least recently used */
    uint32_t slot;
    uint8_t *p = bc_claim(bc, SLOT, &slot);
    assert_non_null(p);
    memset(p, 0x99, SLOT);
    assert_int_equal(tag_of(bc, 1, 1), -1);
    assert_false(bc_has(bc, 1, 1));
    assert_int_equal(tag_of(bc, 1, 2), 0x20);
    bc_unpin(bc, slot);                        /* a failed decode: it stays unnamed */
    assert_int_equal(tag_of(bc, 1, 1), -1);
    bc_free(bc);
}

static void test_second_copy(void **state)
{
    bc_cache *bc = bc_new(SLOT, 4);
    assert_int_equal(put(bc, 7, 1, 0x11), 1);
    assert_int_equal(put(bc, 7, 1, 0x22), 1);  /* the same block decoded again */
    assert_int_equal(tag_of(bc, 7, 1), 0x22);
    uint32_t pinned;
    assert_non_null(bc_pin(bc, 7, 1, 0, 10, &pinned));
    assert_int_equal(put(bc, 7, 1, 0x33), 1);  /* the first is being sent: it stays */
    assert_int_equal(tag_of(bc, 7, 1), 0x22);
    bc_unpin(bc, pinned);
    int named = 0;
    for (uint64_t k = 0; k < 3; k++)
        named += bc_has(bc, 7, k);
    assert_int_equal(named, 1);
    bc_free(bc);
}

/* A block rewritten in place: its new bytes replace the cached ones even while the old copy
 * is pinned for a reply (that reply keeps the old bytes, unnamed); bc_forget drops a name. */
static void test_put_replaces(void **state)
{
    bc_cache *bc = bc_new(SLOT, 4);
    uint8_t src[SLOT];
    assert_int_equal(put(bc, 9, 1, 0x11), 1);
    uint32_t pinned;
    const uint8_t *old = bc_pin(bc, 9, 1, 0, SLOT, &pinned);
    assert_non_null(old);
    memset(src, 0x44, sizeof(src));
    bc_put(bc, 9, 1, src, SLOT);
    assert_int_equal(tag_of(bc, 9, 1), 0x44);
    assert_int_equal(old[0], 0x11);            /* the reply being sent is untouched */
    bc_unpin(bc, pinned);
    assert_int_equal(tag_of(bc, 9, 1), 0x44);
    bc_forget(bc, 9, 1);
    assert_false(bc_has(bc, 9, 1));
    bc_forget(bc, 9, 1);                       /* nothing named: nothing happens */
    bc_put(bc, 9, 2, src, SLOT + 1);           /* longer than a slot: not cached */
    assert_false(bc_has(bc, 9, 2));
    bc_free(bc);
}

/* A writer's buffer changes hands: taken only whole and unpinned (the slot left empty, and
 * filled anew by the next claim), adopted in place of an older copy, handed back when every
 * slot is being sent. */
static void test_take_adopt(void **state)
{
    bc_cache *bc = bc_new(SLOT, 2);
    assert_int_equal(put(bc, 3, 1, 0x31), 1);
    assert_null(bc_take(bc, 3, 1, SLOT - 1));  /* not the whole block */
    assert_null(bc_take(bc, 3, 2, SLOT));      /* not cached */
    uint32_t pinned;
    assert_non_null(bc_pin(bc, 3, 1, 0, SLOT, &pinned));
    assert_null(bc_take(bc, 3, 1, SLOT));      /* a reply sends from it */
    bc_unpin(bc, pinned);
    uint8_t *mine = bc_take(bc, 3, 1, SLOT);
    assert_non_null(mine);
    assert_int_equal(mine[SLOT - 1], 0x31);
    assert_false(bc_has(bc, 3, 1));
    assert_int_equal(put(bc, 3, 5, 0x35), 1);  /* the emptied slot gets a buffer again */
    assert_int_equal(put(bc, 3, 6, 0x36), 1);
    assert_int_equal(tag_of(bc, 3, 5), 0x35);
    memset(mine, 0x41, SLOT);
    assert_int_equal(put(bc, 3, 1, 0x11), 1);  /* an older copy under the adopted name */
    uint8_t *back = bc_adopt(bc, 3, 1, mine, SLOT);
    assert_non_null(back);
    assert_ptr_not_equal(back, mine);
    assert_int_equal(tag_of(bc, 3, 1), 0x41);
    const uint8_t *a = bc_pin(bc, 3, 1, 0, SLOT, &pinned), *b;
    uint32_t pinned2;
    assert_ptr_equal(a, mine);
    assert_int_equal(put(bc, 3, 7, 0x37), 1);
    assert_non_null(b = bc_pin(bc, 3, 7, 0, SLOT, &pinned2));
    assert_ptr_equal(bc_adopt(bc, 3, 8, back, SLOT), back);      /* every slot pinned */
    assert_ptr_equal(bc_adopt(bc, 3, 8, back, SLOT + 1), back);  /* longer than a slot */
    assert_false(bc_has(bc, 3, 8));
    bc_unpin(bc, pinned);
    bc_unpin(bc, pinned2);
    free(back);
    bc_free(bc);
}

/* A block a sequential reader has passed is the next slot reused, before an empty one is
 * filled and before older blocks; reading it again makes it an ordinary block. */
static void test_passed_goes_first(void **state)
{
    bc_cache *bc = bc_new(SLOT, 4);
    assert_true(put(bc, 1, 10, 'a') && put(bc, 1, 20, 'b') && put(bc, 1, 30, 'c'));
    bc_passed(bc, 1, 20);
    bc_passed(bc, 1, 99);              /* not cached: nothing */
    assert_true(put(bc, 1, 40, 'd'));  /* into b's slot, not the empty fourth */
    assert_int_equal(tag_of(bc, 1, 20), -1);
    assert_int_equal(tag_of(bc, 1, 10), 'a');
    assert_int_equal(tag_of(bc, 1, 30), 'c');
    assert_int_equal(tag_of(bc, 1, 40), 'd');
    assert_true(put(bc, 1, 50, 'e'));  /* the empty slot: nothing was passed */
    assert_int_equal(tag_of(bc, 1, 10), 'a');
    bc_passed(bc, 1, 30);
    assert_int_equal(tag_of(bc, 1, 30), 'c');   /* read again: used, not passed */
    assert_true(put(bc, 1, 60, 'f'));  /* the least recently used (looked at): d */
    assert_int_equal(tag_of(bc, 1, 40), -1);
    assert_int_equal(tag_of(bc, 1, 30), 'c');
    assert_int_equal(tag_of(bc, 1, 10), 'a');
    bc_free(bc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_pins),
        cmocka_unit_test(test_claim_unnames),
        cmocka_unit_test(test_second_copy),
        cmocka_unit_test(test_put_replaces),
        cmocka_unit_test(test_take_adopt),
        cmocka_unit_test(test_passed_goes_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
