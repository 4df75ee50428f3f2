/* lru: an intrusive doubly linked list, most recently used first.
 *
 * Three bounded caches of the daemon keep one: the inode table's directory descriptors
 * (inode.c), the files kept warm after their last close (ops_keep.c) and the open backing
 * descriptors of files (ff_fds.c). Each object holds an lru_node as a member and is found
 * back from it with LRU_ENTRY; the list allocates nothing. The caller holds the lock that
 * guards the list; a node is on at most one list at a time. */
#ifndef FPGALZ4FS_LRU_H
#define FPGALZ4FS_LRU_H

#include <stddef.h>

typedef struct lru_node {
    struct lru_node *prev, *next;      /* NULL at the ends, and both NULL when unlinked */
} lru_node;

typedef struct {
    lru_node *head;                    /* most recently used */
    lru_node *tail;                    /* least recently used: what a cache drops first */
} lru_list;

/* The object of type whose member node is; node must not be NULL. */
#define LRU_ENTRY(node, type, member) ((type *)(void *)((char *)(node) - offsetof(type, member)))

static inline void lru_unlink(lru_list *l, lru_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

/* Puts an unlinked node at the front. */
static inline void lru_push(lru_list *l, lru_node *n)
{
    n->prev = NULL, n->next = l->head;
    if (l->head)
        l->head->prev = n;
    else
        l->tail = n;
    l->head = n;
}

/* Moves a linked node to the front. */
static inline void lru_touch(lru_list *l, lru_node *n)
{
    if (l->head == n)
        return;
    lru_unlink(l, n);
    lru_push(l, n);
}

#endif
