/* gone.c -- a library linked into libneedsgone.so, then deleted: loading
 * libneedsgone.so fails on its DT_NEEDED (tests/attach/inject.sh). */
int ht_test_gone(void)
{
    return 1;
}
