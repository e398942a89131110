// Every form of C++ operator new and delete, for c_api.rs: which library defines each
// operator the program calls ("new_from=", "delete_from=": dladdr of the symbol the
// dynamic linker bound), that every form's blocks are usable and aligned, and that a
// failed new behaves as the C++ runtime says: the new-handler runs and a retry that
// then succeeds returns the block, a throwing new with no handler throws
// std::bad_alloc through the allocator's frames, a nothrow new returns null.
//
// Run with EBB_FAULT_BUDGET (ebb's mappings capped) so that a 48 MiB request fails
// while a 40 MiB reserve is held; under glibc the same lines print from a size no
// allocator can serve.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

static void *opaque(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

static const char *library_of(void *symbol) {
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname)
        return "?";
    const char *slash = std::strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static int failures = 0;
static void check(bool ok, const char *what) {
    std::printf("%s %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

static bool aligned(void *p, std::size_t align) { return ((std::uintptr_t)p & (align - 1)) == 0; }

static char *reserve = nullptr;
static int handler_calls = 0;
static void release_reserve() {
    handler_calls++;
    std::free(reserve);
    reserve = nullptr;
    std::set_new_handler(nullptr);
}

struct alignas(256) Wide {
    char bytes[256];
};

int main(int argc, char **argv) {
    // Large enough to fail under the budget the test sets, and under any allocator
    // when asked ("huge").
    std::size_t big = (argc > 1 && std::strcmp(argv[1], "huge") == 0) ? (std::size_t)1 << 62
                                                                     : (std::size_t)48 << 20;
    std::printf("new_from=%s\n", library_of(dlsym(RTLD_DEFAULT, "_Znwm")));
    std::printf("delete_from=%s\n", library_of(dlsym(RTLD_DEFAULT, "_ZdlPvm")));

    // Every form, with the matching delete; written so the compiler keeps each call.
    for (int round = 0; round < 1000; round++) {
        std::size_t n = 1 + (std::size_t)round % 300;
        char *a = (char *)opaque(::operator new(n));
        std::memset(a, 1, n);
        ::operator delete(a, n);
        char *b = (char *)opaque(::operator new[](n));
        std::memset(b, 2, n);
        ::operator delete[](b);
        char *c = (char *)opaque(::operator new(n, std::nothrow));
        std::memset(c, 3, n);
        ::operator delete(c, std::nothrow);
        char *d = (char *)opaque(::operator new[](n, std::nothrow));
        ::operator delete[](d, n);
        std::size_t align = (std::size_t)64 << (round % 7);
        char *e = (char *)opaque(::operator new(n, std::align_val_t(align)));
        if (!aligned(e, align)) {
            check(false, "aligned new");
            break;
        }
        std::memset(e, 4, n);
        ::operator delete(e, n, std::align_val_t(align));
        char *f = (char *)opaque(::operator new[](n, std::align_val_t(align), std::nothrow));
        if (!f || !aligned(f, align)) {
            check(false, "aligned nothrow new[]");
            break;
        }
        ::operator delete[](f, std::align_val_t(align), std::nothrow);
        Wide *w = new Wide[3];
        if (!aligned(w, alignof(Wide))) {
            check(false, "new of an over-aligned type");
            break;
        }
        delete[] w;
        Wide *one = new Wide;
        delete one;
    }
    check(true, "every form served and freed");
    check(opaque(::operator new(0)) != opaque(::operator new(0)), "new(0) gives distinct blocks");

    // A failed new calls the handler, which frees the reserve; the retry succeeds.
    reserve = (char *)std::malloc((std::size_t)40 << 20);
    std::memset(reserve, 5, (std::size_t)40 << 20);
    std::set_new_handler(release_reserve);
    bool served = false;
    try {
        char *p = (char *)opaque(::operator new(big));
        served = p != nullptr;
        if (served)
            ::operator delete(p);
    } catch (const std::bad_alloc &) {
        served = false;
    }
    std::printf("handler_calls=%d\n", handler_calls);
    std::printf("served_after_handler=%s\n", served ? "yes" : "no");

    // No handler: std::bad_alloc, caught here.
    std::size_t impossible = (std::size_t)1 << 62;
    bool thrown = false;
    try {
        opaque(::operator new(impossible));
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    check(thrown, "new throws std::bad_alloc");
    thrown = false;
    try {
        opaque(::operator new[](impossible, std::align_val_t(64)));
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    check(thrown, "aligned new[] throws std::bad_alloc");
    check(opaque(::operator new(impossible, std::nothrow)) == nullptr, "nothrow new gives null");
    check(opaque(::operator new[](impossible, std::align_val_t(128), std::nothrow)) == nullptr,
          "aligned nothrow new[] gives null");
    std::printf("failures=%d\n", failures);
    return failures ? 1 : 0;
}
