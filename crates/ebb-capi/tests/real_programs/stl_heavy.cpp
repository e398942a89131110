// An STL-heavy C++ program with deterministic output, for crates/ebb-capi/tests/real_programs.rs.
// It is compiled with g++ -O2 with and without LD_PRELOAD=libebb.so (so cc1plus, as and ld
// allocate through ebb); the object files must be identical and so must the output of the
// two binaries (the one built under ebb also runs under ebb).
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <iomanip>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace {

// FNV-1a over anything streamable, so results print as short digests.
struct Digest {
    uint64_t h = 1469598103934665603ull;
    template <typename T>
    Digest &operator<<(const T &v) {
        std::ostringstream os;
        os << v << '|';
        for (unsigned char c : os.str()) h = (h ^ c) * 1099511628211ull;
        return *this;
    }
};

std::ostream &operator<<(std::ostream &os, const Digest &d) {
    return os << std::hex << std::setw(16) << std::setfill('0') << d.h << std::dec;
}

template <typename Rng>
std::string word(Rng &rng) {
    std::uniform_int_distribution<int> len(1, 16), ch('a', 'z');
    std::string s(len(rng), ' ');
    for (auto &c : s) c = static_cast<char>(ch(rng));
    return s;
}

// A small expression tree with virtual dispatch and unique_ptr ownership.
struct Expr {
    virtual ~Expr() = default;
    virtual int64_t eval() const = 0;
};
struct Lit : Expr {
    int64_t v;
    explicit Lit(int64_t v) : v(v) {}
    int64_t eval() const override { return v; }
};
struct Bin : Expr {
    char op;
    std::unique_ptr<Expr> l, r;
    Bin(char op, std::unique_ptr<Expr> l, std::unique_ptr<Expr> r)
        : op(op), l(std::move(l)), r(std::move(r)) {}
    int64_t eval() const override {
        int64_t a = l->eval(), b = r->eval();
        switch (op) {
        case '+': return a + b;
        case '-': return a - b;
        default: return (a * b) % 1000003;
        }
    }
};

template <typename Rng>
std::unique_ptr<Expr> tree(Rng &rng, int depth) {
    if (depth == 0 || rng() % 4 == 0) return std::make_unique<Lit>(static_cast<int64_t>(rng() % 100));
    static const char ops[] = "+-*";
    return std::make_unique<Bin>(ops[rng() % 3], tree(rng, depth - 1), tree(rng, depth - 1));
}

template <typename Map>
Digest digest_map(const Map &m) {
    Digest d;
    for (const auto &[k, v] : m) d << k << v;
    return d;
}

using Value = std::variant<int64_t, double, std::string, std::vector<int>>;

struct Visitor {
    Digest &d;
    void operator()(int64_t v) { d << "i" << v; }
    void operator()(double v) { d << "d" << static_cast<int64_t>(v * 1000); }
    void operator()(const std::string &v) { d << "s" << v; }
    void operator()(const std::vector<int> &v) { d << "v" << std::accumulate(v.begin(), v.end(), 0LL); }
};

}  // namespace

int main() {
    std::mt19937_64 rng(12345);

    // map / unordered_map / set with string keys
    std::map<std::string, int> ordered;
    std::unordered_map<std::string, std::vector<int>> buckets;
    std::set<std::pair<int, std::string>> pairs;
    for (int i = 0; i < 200000; i++) {
        std::string w = word(rng);
        ordered[w] += i % 13;
        buckets[w.substr(0, 2)].push_back(i);
        if (i % 5 == 0) pairs.emplace(static_cast<int>(w.size()), w);
    }
    for (auto it = ordered.begin(); it != ordered.end();) it = (it->second % 3 == 0) ? ordered.erase(it) : std::next(it);
    std::map<std::string, size_t> bucket_sizes;
    for (const auto &[k, v] : buckets) bucket_sizes[k] = v.size();
    std::cout << "map " << ordered.size() << " " << digest_map(ordered) << "\n";
    std::cout << "unordered " << buckets.size() << " " << digest_map(bucket_sizes) << "\n";
    std::cout << "set " << pairs.size() << " " << pairs.begin()->second << " " << pairs.rbegin()->second << "\n";

    // vectors and algorithms
    std::vector<uint64_t> v(1 << 20);
    std::generate(v.begin(), v.end(), [&] { return rng() % 1000000; });
    std::vector<uint64_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    std::stable_sort(v.begin(), v.end(), [](uint64_t a, uint64_t b) { return a % 1000 < b % 1000; });
    auto last = std::unique(sorted.begin(), sorted.end());
    sorted.erase(last, sorted.end());
    std::vector<uint64_t> merged;
    std::merge(sorted.begin(), sorted.end(), v.begin(), v.begin() + 1000, std::back_inserter(merged));
    std::partial_sort(v.begin(), v.begin() + 100, v.end(), std::greater<>());
    Digest dv;
    for (size_t i = 0; i < merged.size(); i += 4099) dv << merged[i];
    std::cout << "vector " << sorted.size() << " " << merged.size() << " " << v[0] << " " << dv << "\n";

    // strings: building, streams, regex
    std::string text;
    for (int i = 0; i < 100000; i++) {
        text += word(rng);
        text += (i % 17 == 0) ? "\n" : " ";
    }
    std::istringstream in(text);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) lines.push_back(line);
    std::regex re("([a-z])\\1([a-z]*)");
    size_t matches = 0;
    Digest dr;
    for (size_t i = 0; i < lines.size(); i += 3)
        for (std::sregex_iterator it(lines[i].begin(), lines[i].end(), re), end; it != end; ++it) {
            matches++;
            dr << (*it)[0].str();
        }
    std::cout << "strings " << text.size() << " " << lines.size() << " " << matches << " " << dr << "\n";

    // lists, deques, shared_ptr graphs, std::function
    std::list<std::shared_ptr<std::vector<int>>> owners;
    std::deque<std::weak_ptr<std::vector<int>>> watchers;
    for (int i = 0; i < 50000; i++) {
        auto p = std::make_shared<std::vector<int>>(i % 100, i);
        owners.push_back(p);
        watchers.push_back(p);
        if (owners.size() > 1000) owners.pop_front();
    }
    size_t alive = std::count_if(watchers.begin(), watchers.end(), [](auto &w) { return !w.expired(); });
    std::vector<std::function<int64_t(int64_t)>> fns;
    for (int i = 0; i < 1000; i++) fns.emplace_back([i, s = std::string(i % 50, 'x')](int64_t x) { return x * 31 + i + static_cast<int64_t>(s.size()); });
    int64_t acc = 0;
    for (int r = 0; r < 100; r++)
        for (auto &f : fns) acc = f(acc) % 1000000007;
    std::cout << "shared " << alive << " fn " << acc << "\n";

    // trees with virtual dispatch
    int64_t trees = 0;
    for (int i = 0; i < 2000; i++) trees = (trees + tree(rng, 12)->eval()) % 1000000007;
    std::cout << "trees " << trees << "\n";

    // variants
    std::vector<Value> values;
    for (int i = 0; i < 100000; i++) {
        switch (rng() % 4) {
        case 0: values.emplace_back(static_cast<int64_t>(rng() % 1000)); break;
        case 1: values.emplace_back(static_cast<double>(rng() % 1000) / 7.0); break;
        case 2: values.emplace_back(word(rng)); break;
        default: values.emplace_back(std::vector<int>(rng() % 20, i)); break;
        }
    }
    Digest dvar;
    for (auto &val : values) std::visit(Visitor{dvar}, val);
    std::cout << "variant " << dvar << "\n";

    // threads: each builds its own map; results are combined in a fixed order
    std::vector<std::map<int, std::string>> parts(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
        threads.emplace_back([t, &parts] {
            std::mt19937 r(t);
            for (int i = 0; i < 50000; i++) parts[t][static_cast<int>(r() % 100000)] = std::string(r() % 64, static_cast<char>('a' + t));
        });
    for (auto &t : threads) t.join();
    Digest dt;
    for (auto &p : parts) dt << p.size() << digest_map(p);
    std::cout << "threads " << dt << "\n";
    return 0;
}
