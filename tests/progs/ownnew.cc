// ownnew: a C++ program with its own operator new and delete that take
// their memory from malloc (a common pattern for out-of-memory policies):
// heaptrail sees the blocks through malloc, and says the operators are
// the program's own. Leaks 3 ints.
#include <cstdio>
#include <cstdlib>
#include <new>

void *operator new(std::size_t n)
{
    void *p = std::malloc(n ? n : 1);
    if (!p)
        throw std::bad_alloc();
    return p;
}

void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }

int *volatile keep[3];

int main()
{
    for (int i = 0; i < 3; i++)
        keep[i] = new int(i);
    int *gone = new int(7);
    delete gone;
    std::puts("ownnew: 3 ints leaked through its own operator new");
    return 0;
}
