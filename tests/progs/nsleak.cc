// nsleak.cc -- a namespaced class's members lose what they allocate with
// new: insert() 40 bytes (new int[10]), grow() 8 (new long), put() 2
// (new short), inlined into fill(). For Valgrind suppressions, which
// name C++ functions by their mangled names (_ZN5cache5Store6insertEi,
// _ZN5cache5Store4growEv, _ZN5cache5Store4fillEv), an inlined one by its
// plain name (put), and the allocator by its own (_Znam, _Znwm):
// tests/agent/suppress.sh. Exits 0.
static void *volatile sink;

namespace cache {
struct Store {
    __attribute__((noinline)) void insert(int n);
    __attribute__((noinline)) static void grow();
    __attribute__((always_inline)) void put()
    {
        sink = new short(2);
        sink = nullptr;
    }
    __attribute__((noinline)) void fill();
};

void Store::insert(int n)
{
    sink = new int[n];
    sink = nullptr;
}

void Store::grow()
{
    sink = new long(1);
    sink = nullptr;
}

void Store::fill()
{
    put();
}
}

// zeroes dead stack below main's frame: a stale copy of a lost pointer
// there would make a conservative scan call its block reachable
__attribute__((noinline)) static void scrub_stack()
{
    volatile char pad[16384];
    for (unsigned i = 0; i < sizeof pad; i++)
        pad[i] = 0;
}

int main()
{
    cache::Store s;
    s.insert(10);
    cache::Store::grow();
    s.fill();
    scrub_stack();
    return 0;
}
