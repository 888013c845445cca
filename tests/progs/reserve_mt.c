/* reserve_mt.c -- four threads map 1 MiB reservations (PROT_NONE), make
 * random parts of them accessible and reserved again with mprotect, and
 * unmap them (some in two steps), 20,000 times each; then each leaves one
 * reservation with 64 KiB made readable. Truth: 262,144 bytes in 4
 * regions from 1 site, whatever order the threads' calls took. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (1u << 20)
#define PAGE 4096u

static void *run(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int i = 0; i < 20000; i++) {
        char *r = mmap(NULL, MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED)
            abort();
        for (int k = 0; k < 4; k++) {
            /* inside the region only: a neighbour may be anyone's */
            size_t off = (rand_r(&seed) % 240) * PAGE, len = (rand_r(&seed) % 16 + 1) * PAGE;
            if (mprotect(r + off, len, (rand_r(&seed) & 1) ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
                abort();
        }
        if (i % 1000 == 999)
            munmap(r + PAGE, 2 * PAGE);
        munmap(r, MIB);
    }
    char *r = mmap(NULL, MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED || mprotect(r + 65536, 65536, PROT_READ) != 0)
        abort();
    return NULL;
}

int main(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, run, (void *)(i + 1)) != 0)
            return 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return write(1, "done\n", 5) == 5 ? 0 : 1;
}
