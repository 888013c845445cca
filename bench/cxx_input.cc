// cxx_input.cc -- a small C++ file whose compilation (clang++ -O2 -c)
// allocates 3 million blocks from 135,000 distinct stacks: a real
// program with deep, varied stacks for docs/BENCHMARKS.md (by hand).
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

int main()
{
    std::map<std::string, std::vector<int>> m;
    for (int i = 0; i < 1000; i++) {
        std::ostringstream o;
        o << i;
        m[o.str()].push_back(i);
    }
    std::regex r("[0-9]+");
    size_t c = 0;
    for (const auto &kv : m)
        if (std::regex_match(kv.first, r))
            c += kv.second.size();
    std::cout << c << "\n";
}
