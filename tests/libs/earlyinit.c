/* earlyinit: a library whose constructor allocates. A program's libraries
 * are set up before a preloaded one, so this malloc comes before the
 * agent's constructor has run (tests/agent/foreign.sh, ownmalloc_early). */
#include <stdlib.h>

void *volatile earlyinit_block;   /* (a malloc freed at once is optimised away) */

__attribute__((constructor)) static void early(void)
{
    earlyinit_block = malloc(24);
}
