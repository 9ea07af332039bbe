// newdelete.cc: C++ operator new and delete reach malloc and free through
// libstdc++, and are counted like them (see known.c for the protocol).
#include <new>
#include <string>
#include <vector>
#include "steps.h"

struct Node {
    char payload[120];
    Node *next;
};

int main()
{
    usleep(20000);
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    Node *n = new Node;
    step("new", 1, 0, U(n), 0, 0);
    long long u = U(n);
    delete n;
    step("delete", 0, 1, 0, u, 0);
    int *a = new int[1000];
    step("new[]", 1, 0, U(a), 0, 0);
    u = U(a);
    delete[] a;
    step("delete[]", 0, 1, 0, u, 0);
    Node *al = static_cast<Node *>(::operator new(sizeof(Node), std::align_val_t(256)));
    step("new-aligned", 1, 0, U(al), 0, 0);
    u = U(al);
    ::operator delete(al, std::align_val_t(256));
    step("delete-aligned", 0, 1, 0, u, 0);
    Node *nt = new (std::nothrow) Node;
    step("new-nothrow", 1, 0, U(nt), 0, 0);
    u = U(nt);
    delete nt;
    step("delete-nothrow", 0, 1, 0, u, 0);
    bool threw = false;
    try {
        // kept in a volatile global: C++ may elide a new whose block is unused
        static char *volatile big;
        big = new char[(size_t)1 << 62];
        delete[] big;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    if (!threw)
        fail("new of 2^62 bytes did not throw");
    step("new-bad_alloc", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0); // the exception object is allocated
    {
        std::vector<int> v;
        for (int i = 0; i < 1000; i++)
            v.push_back(i);
    }
    step("vector", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, 0);
    out("DONE\n");
    return 0;
}
