// leaksxx.cc -- C++ allocations through every operator new/delete variant,
// some leaked from functions named leak_*; prints the truth for those.
#include <cstdio>
#include <new>

struct alignas(64) Wide { char x[64]; };
static void *volatile sink;
static unsigned long long bytes, blocks, sites;

__attribute__((noinline)) static void leak_new() { for (int i = 0; i < 3; i++) sink = new int(i); bytes += 12; blocks += 3; sites++; }
__attribute__((noinline)) static void leak_new_array() { sink = new char[100]; bytes += 100; blocks++; sites++; }
__attribute__((noinline)) static void leak_nothrow() { sink = new (std::nothrow) double(1); bytes += 8; blocks++; sites++; }
__attribute__((noinline)) static void leak_aligned_new() { sink = new Wide; bytes += 64; blocks++; sites++; }
__attribute__((noinline)) static void leak_aligned_array() { sink = new Wide[2]; bytes += 128; blocks++; sites++; }
__attribute__((noinline)) static void freed_all()
{
    for (int i = 0; i < 50; i++) {
        // through a volatile pointer: C++14 lets new/delete pairs be elided
        int *a = new int(i); sink = a; delete static_cast<int *>(sink);
        char *b = new char[10 + i]; sink = b; delete[] static_cast<char *>(sink);
        Wide *c = new Wide; sink = c; delete static_cast<Wide *>(sink);
        Wide *d = new Wide[3]; sink = d; delete[] static_cast<Wide *>(sink);
        ::operator delete(::operator new(20, std::nothrow), std::nothrow);
        ::operator delete(::operator new(40), (size_t)40);
        ::operator delete(::operator new(64, std::align_val_t(128)), std::align_val_t(128));
    }
}

int main()
{
    leak_new();
    leak_new_array();
    leak_nothrow();
    leak_aligned_new();
    leak_aligned_array();
    freed_all();
    std::printf("TRUTH bytes=%llu blocks=%llu sites=%llu\n", bytes, blocks, sites);
    return 0;
}
