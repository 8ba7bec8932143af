/* Proves the valgrind launcher of the C tests works: `leak` loses a block, `read` reads past
 * a heap block; both must make memcheck fail the run. No argument: a clean run that must pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    char *volatile p = malloc(16);
    if (!p) return 2;
    memset(p, 1, 16);
    if (argc > 1 && strcmp(argv[1], "leak") == 0) {
        p = NULL; /* the only pointer is gone: definitely lost */
        return 0;
    }
    int out = 0;
    if (argc > 1 && strcmp(argv[1], "read") == 0) out = p[16]; /* one past the end */
    free(p);
    printf("canary %d\n", out);
    return 0;
}
