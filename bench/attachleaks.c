/* attachleaks.c -- bench/attach-leaks.sh: a leak check in a process
 * heaptrail attached to, against the same program under heaptrail run.
 *   attachleaks N    N blocks (64..255 bytes, a list through them) made
 *   at start; on "go" N/10 more, every 10th lost; then waits for a line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
struct node {
    struct node *next;
    char pad[];
};
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    struct node *head = NULL;
    for (long i = 0; i < n; i++) {
        struct node *x = malloc(64 + (i * 37) % 192);
        x->next = head; head = x;
        if (i % 3 == 0) free(malloc(100));
    }
    printf("ready\n"); fflush(stdout);
    char buf[64];
    while (fgets(buf, sizeof buf, stdin)) {
        if (!strncmp(buf, "go", 2)) {
            for (long i = 0; i < n / 10; i++) {
                struct node *x = malloc(64 + (i * 37) % 192);
                if (i % 10) { x->next = head; head = x; }
            }
            printf("went\n"); fflush(stdout);
        } else break;
    }
    return 0;
}
