// A fixed pool of worker threads for the CPU backend. parallelFor splits [0, n) into contiguous chunks,
// one per thread, and blocks until all are done; the calling thread takes a chunk itself, so a pool of
// N threads runs N-way parallel with N-1 workers. Nested parallelFor calls run serially (no deadlock).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
public:
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return m_size; }
    // fn(begin, end) over contiguous sub-ranges; grain = the smallest range worth a thread.
    void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);
    // Same, with the grain derived from the cost of one item (≈ multiply-adds): a chunk is only worth
    // a thread wake-up (~10 µs) when it holds at least kMinChunkCost of work. Small ops run inline.
    static constexpr int64_t kMinChunkCost = 1 << 16;
    void parallelForCost(int64_t n, int64_t costPerItem, const std::function<void(int64_t, int64_t)>& fn) {
        parallelFor(n, fn, std::max<int64_t>(1, kMinChunkCost / std::max<int64_t>(1, costPerItem)));
    }

    // The process-wide pool used by the CPU backend (threads = TS_THREADS env or hardware concurrency).
    static ThreadPool& global();
    static void setGlobalThreads(int threads);

private:
    void workerLoop(int index);

    int m_size;
    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    const std::function<void(int64_t, int64_t)>* m_job = nullptr;
    int64_t m_n = 0;
    int m_chunks = 0;
    uint64_t m_generation = 0;
    int m_pending = 0;
    bool m_stop = false;
};

}  // namespace ts
