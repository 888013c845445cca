// possiblexx.cc -- blocks that only pointers into their middle hold, as
// real C++ makes them: an object with two bases held as its second base
// (a pointer to its secondary vtable pointer), an array of objects with a
// destructor held by new[]'s result (8 bytes in, after the element
// count), each reached as memcheck's heuristics reach them; and a block
// held only 50 bytes in, and what it alone points to, possibly lost.
// Prints the truth for tests/agent/possible.sh:
//   TRUTH site=NAME live=K lost=D ilost=I plost=P
// `possiblexx kept` leaves out the definitely lost one.
#include <cstdio>
#include <cstdlib>

struct Left { virtual ~Left() {} long a = 1; };
struct Right { virtual ~Right() {} long b = 2; };
struct Both : Left, Right { long c = 3; };
struct Counted { Counted() : x(1) {} ~Counted() { x = 0; } long x; };
struct Node { Node *next; long pad[5]; };

Right *as_right;        // points 16 bytes into a Both
Counted *counted;       // new Counted[5]: 8 bytes into its block
char *middle;           // 50 bytes into a block
Right *lost_right;      // cleared: the Both it held is lost

__attribute__((noinline)) static void make_both() { as_right = new Both; }
__attribute__((noinline)) static void make_counted() { counted = new Counted[5]; }
__attribute__((noinline)) static void make_middle()
{
    Node *b = new Node{nullptr, {}};
    Node *a = static_cast<Node *>(std::malloc(sizeof(Node)));
    a->next = b;
    middle = reinterpret_cast<char *>(a) + 16;
}
__attribute__((noinline)) static void make_lost()
{
    Right *volatile *p = &lost_right;   // volatile stores: the new is not elided
    *p = new Both;
    *p = nullptr;
}

int main(int argc, char **argv)
{
    bool lose = argc < 2;   // `possiblexx kept`: nothing definitely lost
    make_both();
    make_counted();
    make_middle();
    if (lose)
        make_lost();
    std::printf("TRUTH site=make_both live=1 lost=0 ilost=0 plost=0\n"
                "TRUTH site=make_counted live=1 lost=0 ilost=0 plost=0\n"
                "TRUTH site=make_middle live=2 lost=0 ilost=0 plost=2\n");
    if (lose)
        std::printf("TRUTH site=make_lost live=1 lost=1 ilost=0 plost=0\n");
    return 0;
}
