// oldstring.cc -- std::string of libstdc++'s old (copy-on-write) ABI,
// still the ABI of long-lived C++ code bases (built before GCC 5, or with
// _GLIBCXX_USE_CXX11_ABI=0): the string object holds a pointer to its
// characters, 24 bytes into the heap block that begins with the length,
// the capacity and a reference count. memcheck's "stdstring" heuristic
// counts such a pointer as one to the block's start, and so does
// heaptrail's leak check. Blocks of the same size held 24 bytes in whose
// words do not have that shape (a capacity that does not match the size;
// a length above the capacity) stay possibly lost. Prints the truth for
// tests/agent/possible.sh:
//   TRUTH site=NAME live=K lost=D ilost=I plost=P
#define _GLIBCXX_USE_CXX11_ABI 0
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

// The string object in .bss, never destroyed (a global std::string's
// destructor would free its block at exit, before the leak check): a root
// pointing 24 bytes into its block.
alignas(std::string) static char storage[sizeof(std::string)];
std::string *held;
char *bad_capacity;     // 24 bytes into blocks of the wrong shape
char *bad_length;

__attribute__((noinline)) static void make_string()
{
    held = new (storage) std::string;
    held->assign(200, 'x');     // the block: libstdc++'s _Rep::_S_create
}

static char *shape(size_t *b, size_t length, size_t capacity)
{
    b[0] = length;
    b[1] = capacity;
    b[2] = 0;
    return reinterpret_cast<char *>(b + 3);
}
__attribute__((noinline)) static void make_bad_capacity()
{
    bad_capacity = shape(static_cast<size_t *>(std::malloc(24 + 200 + 1)), 100, 199);
}
__attribute__((noinline)) static void make_bad_length()
{
    bad_length = shape(static_cast<size_t *>(std::malloc(24 + 200 + 1)), 201, 200);
}

int main()
{
    make_string();
    make_bad_capacity();
    make_bad_length();
    // trace_dump --match names a site by its innermost frame
    std::printf("TRUTH site=_S_create live=1 lost=0 ilost=0 plost=0\n"
                "TRUTH site=make_bad_capacity live=1 lost=0 ilost=0 plost=1\n"
                "TRUTH site=make_bad_length live=1 lost=0 ilost=0 plost=1\n");
    return held->size() == 200 ? 0 : 1;
}
