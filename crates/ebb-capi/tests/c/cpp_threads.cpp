// C++ objects created in one std::thread and deleted in another: std::string,
// std::vector, and a class that owns a new[] array (plus arrays of such objects),
// exchanged through a mutex-protected queue; every consumer checks the contents before
// deleting. operator new/delete of libstdc++ call malloc/free, so under LD_PRELOAD
// every object crosses threads inside ebb.
// Prints "ebb=yes|no", "items=N bad=0 cross_thread=M" and "done"; exits non-zero on any
// failure.
#include <dlfcn.h>

#include "ebb.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kItemsPerThread = 20000;

uint8_t byte_of(uint64_t seed, size_t j) { return static_cast<uint8_t>(seed * 2654435761u + j * 31u); }

class Blob {
  public:
    Blob() : Blob(0, 1) {}
    Blob(uint64_t seed, size_t size) : seed_(seed), size_(size), data_(new uint8_t[size]) {
        for (size_t j = 0; j < size_; j++)
            data_[j] = byte_of(seed_, j);
    }
    Blob(const Blob &) = delete;
    Blob &operator=(const Blob &) = delete;
    ~Blob() { delete[] data_; }
    void reset(uint64_t seed, size_t size) {
        delete[] data_;
        seed_ = seed;
        size_ = size;
        data_ = new uint8_t[size];
        for (size_t j = 0; j < size_; j++)
            data_[j] = byte_of(seed_, j);
    }
    bool ok() const {
        for (size_t j = 0; j < size_; j++)
            if (data_[j] != byte_of(seed_, j))
                return false;
        return true;
    }

  private:
    uint64_t seed_;
    size_t size_;
    uint8_t *data_;
};

struct Item {
    int producer = 0;
    uint64_t seed = 0;
    std::string text;
    std::vector<uint64_t> numbers;
    std::unique_ptr<Blob> blob;
    Blob *blobs = nullptr; // new Blob[count]: array new with a cookie
    size_t blob_count = 0;

    Item(int producer_, uint64_t seed_) : producer(producer_), seed(seed_) {
        size_t len = 20 + seed % 300; // mostly beyond the small-string buffer
        text.reserve(len);
        for (size_t j = 0; j < len; j++)
            text.push_back(static_cast<char>('a' + byte_of(seed, j) % 26));
        size_t n = seed % 2000 == 0 ? 200000 : seed % 200; // sometimes large (1.6 MB)
        for (size_t j = 0; j < n; j++)
            numbers.push_back(seed ^ (j * 0x9E3779B97F4A7C15ull));
        blob = std::make_unique<Blob>(seed, 1 + seed % 5000);
        blob_count = seed % 4;
        if (blob_count > 0) {
            blobs = new Blob[blob_count];
            for (size_t k = 0; k < blob_count; k++)
                blobs[k].reset(seed + k, 16 + (seed + k) % 100);
        }
    }
    ~Item() { delete[] blobs; }

    bool ok() const {
        size_t len = 20 + seed % 300;
        if (text.size() != len)
            return false;
        for (size_t j = 0; j < len; j++)
            if (text[j] != static_cast<char>('a' + byte_of(seed, j) % 26))
                return false;
        size_t n = seed % 2000 == 0 ? 200000 : seed % 200;
        if (numbers.size() != n)
            return false;
        for (size_t j = 0; j < n; j++)
            if (numbers[j] != (seed ^ (j * 0x9E3779B97F4A7C15ull)))
                return false;
        if (!blob || !blob->ok())
            return false;
        for (size_t k = 0; k < blob_count; k++)
            if (!blobs[k].ok())
                return false;
        return true;
    }
};

std::mutex queue_mutex;
std::condition_variable queue_cv;
std::deque<Item *> queue;
int producers_left = kThreads;
std::atomic<long> consumed{0}, bad{0}, cross_thread{0};

void worker(int id) {
    uint64_t seed = 1000003u * static_cast<uint64_t>(id + 1);
    for (int k = 0; k < kItemsPerThread; k++) {
        Item *item = new Item(id, seed++);
        Item *taken = nullptr;
        {
            std::lock_guard<std::mutex> lock(queue_mutex);
            queue.push_back(item);
            // Take one from the front, preferring another thread's item.
            if (queue.size() > 8) {
                for (auto it = queue.begin(); it != queue.end(); ++it)
                    if ((*it)->producer != id) {
                        taken = *it;
                        queue.erase(it);
                        break;
                    }
            }
        }
        queue_cv.notify_one();
        if (taken != nullptr) {
            if (!taken->ok())
                bad++;
            if (taken->producer != id)
                cross_thread++;
            delete taken;
            consumed++;
        }
    }
    // Drain what is left (including other threads' items) once every producer is done.
    std::unique_lock<std::mutex> lock(queue_mutex);
    producers_left--;
    queue_cv.notify_all();
    for (;;) {
        queue_cv.wait(lock, [] { return !queue.empty() || producers_left == 0; });
        if (queue.empty())
            break;
        Item *taken = queue.front();
        queue.pop_front();
        lock.unlock();
        if (!taken->ok())
            bad++;
        if (taken->producer != id)
            cross_thread++;
        delete taken;
        consumed++;
        lock.lock();
    }
}

} // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    auto stats = reinterpret_cast<int (*)(ebb_stats_t *)>(dlsym(RTLD_DEFAULT, "ebb_stats"));
    std::printf("ebb=%s\n", stats != nullptr ? "yes" : "no");
    if (stats != nullptr) {
        // operator new goes to ebb: a live 4 MiB vector shows in its statistics.
        ebb_stats_t before{}, during{};
        stats(&before);
        auto big = std::make_unique<std::vector<char>>(4u << 20, 'x');
        stats(&during);
        if (during.allocated < before.allocated + (4u << 20)) {
            std::printf("operator new is not served by ebb\n");
            return 1;
        }
    }
    std::vector<std::thread> threads;
    for (int id = 0; id < kThreads; id++)
        threads.emplace_back(worker, id);
    for (auto &t : threads)
        t.join();
    long total = static_cast<long>(kThreads) * kItemsPerThread;
    std::printf("items=%ld bad=%ld\n", consumed.load(), bad.load());
    if (consumed.load() != total || bad.load() != 0)
        return 1;
    if (cross_thread.load() < total / 2) {
        std::printf("only %ld of %ld items were deleted by another thread\n", cross_thread.load(), total);
        return 1;
    }
    std::printf("most items deleted by another thread\n");
    std::printf("done\n");
    return 0;
}
