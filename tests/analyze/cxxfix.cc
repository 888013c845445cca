// cxxfix.cc -- writes an analyzer fixture from C++ code: a member of a
// class template in a namespace, a constructor and operators, so the
// report must show demangled, qualified names (with the < > & that HTML
// output must escape).
#include "analyze/fixwriter.h"

static volatile int sink;

namespace ns {
template <typename T> struct Pool {
    __attribute__((noinline)) void grow(size_t n)
    {
        fix_alloc(n * sizeof(T));
        sink++;
    }
};
}

struct Widget {
    Widget();
    __attribute__((noinline)) Widget &operator+=(int n);
    __attribute__((noinline)) Widget &operator&=(int n);
};

__attribute__((noinline)) Widget::Widget()
{
    fix_alloc(48);
    sink++;
}

Widget &Widget::operator+=(int n)
{
    fix_alloc((uint64_t)n);
    sink++;
    return *this;
}

Widget &Widget::operator&=(int n)
{
    fix_alloc((uint64_t)n);
    sink++;
    return *this;
}

int main()
{
    fix_init(stdout);
    fix_modules();
    ns::Pool<int> p;
    p.grow(10);
    Widget w;
    w += 24;
    w &= 16;
    fix_snapshot(HT_SNAP_EXIT_);
    fix_finish();
    return 0;
}
