/* finifree.c -- a library that cleans up in its destructor, as gnutls
 * and libtasn1 do: its constructor builds a ten-node list (10 blocks of
 * 100 bytes) and keeps one more block (777 bytes) in a global; its
 * destructor frees the list and clears the global without freeing that
 * block. Preloaded beside the agent (tests/agent/leaks.sh), which the
 * loader finishes before it: the exit snapshot must come after this
 * destructor, as memcheck's does -- the list freed, the 777 bytes
 * unreachable (definitely lost), not still reachable. */
#include <stdlib.h>

struct node { struct node *next; char pad[92]; };
static struct node *list;
static void *volatile kept;

__attribute__((constructor)) static void finifree_init(void)
{
    for (int i = 0; i < 10; i++) {
        struct node *n = malloc(sizeof *n);
        n->next = list;
        list = n;
    }
    kept = malloc(777);
}

__attribute__((destructor)) static void finifree_fini(void)
{
    while (list) {
        struct node *n = list;
        list = n->next;
        free(n);
    }
    kept = NULL;
}
