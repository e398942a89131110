// Sized delete with the wrong size: an object of 32 bytes deleted as if it were 4096.
#include <cstdio>
#include <cstdlib>
#include <new>
static void *opaque(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}
int main() {
    void *p = opaque(::operator new(32));
    std::printf("committing: sized delete of a 32-byte object with size 4096\n");
    std::fflush(stdout);
    ::operator delete(p, 4096);
    for (int i = 0; i < 64; i++) ::operator delete(::operator new(32));
    std::printf("survived\n");
    return 0;
}
